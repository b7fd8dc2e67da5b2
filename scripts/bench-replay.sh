#!/usr/bin/env bash
# Replay throughput and peak memory against the input's size: for each
# --steps, cmd/simulate writes a fleet's positions to a file, then
# `alerter replay` reads it on one core (taskset -c 1) against the 92 zones
# of testdata/zones/airports.geojson, timed by GNU time (wall, user + sys,
# max RSS). Writes the figures as JSON (the Tables shape of
# internal/benchcharts, which draws BENCHMARKS.md's replay chart from it):
#
#   bash scripts/bench-replay.sh --json benchmarks/replay-sizes.json [--drones 1000] [--steps "70 700 7000"]
#
# 7000 steps of 1,000 drones is BENCHMARKS.md's 1 GB file; the files go to
# a temporary directory, removed at the end. Needs about 1.1 GB of disk.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/common.sh

drones=1000 steps="70 700 7000" json=""
while (($#)); do
  case $1 in
    --drones) drones=$2; shift 2 ;;
    --steps) steps=$2; shift 2 ;;
    --json) json=$2; shift 2 ;;
    *) die "usage: $0 --json FILE [--drones N] [--steps \"S1 S2 ...\"]" ;;
  esac
done
[[ -n $json ]] || die "--json FILE is required"
[[ -x /usr/bin/time ]] || die "GNU time (/usr/bin/time) is required for the peak memory"
command -v taskset >/dev/null || die "taskset is required (one core)"

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
go build -o "$tmp/alerter" ./cmd/alerter
go build -o "$tmp/simulate" ./cmd/simulate
zones=testdata/zones/airports.geojson
load_start=$(cut -d' ' -f1-3 /proc/loadavg)
rows=()
for s in $steps; do
  in=$tmp/in.ndjson
  "$tmp/simulate" --drones "$drones" --steps "$s" --out "$in" 2>/dev/null
  bytes=$(stat -c %s "$in")
  # GNU time's line comes last on stderr, after the replay's log.
  /usr/bin/time -f 'TIME %e %U %S %M' taskset -c 1 "$tmp/alerter" replay --zones "$zones" --input "$in" >/dev/null 2>"$tmp/err" ||
    die "replay of $s steps failed: $(tail -5 "$tmp/err")"
  read -r _ wall user sys rss_kb < <(grep '^TIME ' "$tmp/err" | tail -1)
  # The replay's last log line counts what it replayed (JSON logs).
  records=$(grep -o '"msg":"replayed","records":[0-9]*' "$tmp/err" | tail -1 | grep -o '[0-9]*$' || true)
  [[ -n $records ]] || die "no \"replayed\" line from the replay of $s steps: $(tail -3 "$tmp/err")"
  log "$s steps: $bytes bytes, $records records, ${wall}s wall, ${rss_kb} KB max RSS"
  rows+=("$(awk -v d="$drones" -v s="$s" -v b="$bytes" -v n="$records" -v w="$wall" -v u="$user" -v y="$sys" -v k="$rss_kb" 'BEGIN {
    printf "{\"label\": \"%d drones x %d positions\", \"cells\": [%.1f, %d, %.2f, %.2f, %d, %.1f]}", d, s, b / 1e6, n, w, u + y, (w > 0 ? n / w : 0), k / 1024 }')")
  rm -f "$in"
done
load_end=$(cut -d' ' -f1-3 /proc/loadavg)
commit=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)
{
  printf '{\n  "source": "written by scripts/bench-replay.sh on %s",\n' "$(date -u +%F)"
  printf '  "tables": [\n    {\n      "id": "sizes",\n      "section": "replay (issue 14 point 4)",\n'
  printf '      "commit": "%s",\n' "$commit"
  printf '      "command": "bash scripts/bench-replay.sh --drones %s --steps \\"%s\\"",\n' "$drones" "$steps"
  printf '      "machine": "%s CPUs, %s, load average %s at the start, %s at the end",\n' "$(nproc)" "$(go env GOVERSION)" "$load_start" "$load_end"
  printf '      "columns": ["input", "input MB", "records", "wall s", "user + sys s", "records/s", "max RSS MB"],\n'
  printf '      "rows": [\n'
  for i in "${!rows[@]}"; do
    sep=","
    ((i == ${#rows[@]} - 1)) && sep=""
    printf '        %s%s\n' "${rows[$i]}" "$sep"
  done
  printf '      ]\n    }\n  ]\n}\n'
} >"$json"
log "wrote $json"
