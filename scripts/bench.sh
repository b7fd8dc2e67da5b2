#!/usr/bin/env bash
# The benchmark command (make bench): starts the services, then runs every Go
# benchmark with -benchmem on one CPU, each package in turn so they do not
# compete for the 2 cores. BENCH (default .) filters benchmark names,
# BENCHTIME (default 1s) sets -benchtime; figures go to BENCHMARKS.md by hand
# with the command that produced them.
set -euo pipefail
cd "$(dirname "$0")/.."
BENCH=${BENCH:-.}
BENCHTIME=${BENCHTIME:-1s}
bash scripts/services.sh start
for pkg in $(go list ./...); do
  dir=$(go list -f '{{.Dir}}' "$pkg")
  grep -lq '^func Benchmark' "$dir"/*_test.go 2>/dev/null || continue
  echo "== $pkg"
  go test -run='^$' -bench="$BENCH" -benchtime="$BENCHTIME" -benchmem -cpu 1 "$pkg"
done
