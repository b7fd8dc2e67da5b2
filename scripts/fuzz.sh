#!/usr/bin/env bash
# Runs every fuzz target — each `func FuzzX` in a _test.go file, in its own
# package directory — for a while, and fails on the first failing input
# (written under the package's testdata/fuzz by go test).
#
#   scripts/fuzz.sh [REGEXP]       only the targets whose name matches
#
# FUZZTIME (default 20s) is each target's time; targets named in
# scripts/fuzz-stable.txt get FUZZTIME_STABLE (default 5s) instead: their
# coverage stops growing within seconds (the file says how that was
# measured), and their seed corpora also run in every `go test`. Make
# test runs this; for a long hunt: FUZZTIME=10m FUZZTIME_STABLE=10m
# scripts/fuzz.sh FuzzHandler.
set -euo pipefail
cd "$(dirname "$0")/.."
FUZZTIME=${FUZZTIME:-20s}
FUZZTIME_STABLE=${FUZZTIME_STABLE:-5s}
only=${1:-.}

stable=$(grep -Eo '^Fuzz[A-Za-z0-9_]+' scripts/fuzz-stable.txt || true)
fuzzlog=$(mktemp)
trap 'rm -f "$fuzzlog"' EXIT

fuzz_one() {
  go test -run='^$' -fuzz="^${2}\$" -fuzztime="$3" "$1" 2>&1 | tee "$fuzzlog"
  return "${PIPESTATUS[0]}"
}

targets=$(grep -rEo --include='*_test.go' '^func Fuzz[A-Za-z0-9_]+' . | sed -E 's/^\.\///; s/:func /:/' | sort -u)
[[ -n $targets ]] || { echo "no fuzz targets found" >&2; exit 1; }
# A name in the stable list that no longer exists is a stale list.
for name in $stable; do
  grep -q ":$name\$" <<<"$targets" || { echo "scripts/fuzz-stable.txt names $name, which is no fuzz target" >&2; exit 1; }
done
ran=0
while IFS=: read -r file name; do
  [[ $name =~ $only ]] || continue
  pkg=./$(dirname "$file")
  time=$FUZZTIME
  if grep -qx "$name" <<<"$stable"; then time=$FUZZTIME_STABLE; fi
  echo "-- $pkg $name ($time)"
  start=$SECONDS
  if ! fuzz_one "$pkg" "$name" "$time"; then
    # Go before 1.27 can fail a target with a bare "context deadline
    # exceeded" when -fuzztime ends while a worker is busy (Go issue 75804):
    # no input failed. Only that, with no failing input written, gets one
    # more run; anything else fails.
    if grep -q 'context deadline exceeded' "$fuzzlog" && ! grep -q 'Failing input written' "$fuzzlog"; then
      echo "-- $pkg $name: the fuzz coordinator's end-of-time race, no failing input; once more"
      fuzz_one "$pkg" "$name" "$time"
    else
      exit 1
    fi
  fi
  echo "-- $pkg $name: $((SECONDS - start)) s"
  ran=$((ran + 1))
done <<<"$targets"
[[ $ran -gt 0 ]] || { echo "no fuzz target matches $only" >&2; exit 1; }
echo "-- $ran fuzz targets passed in $SECONDS s"
