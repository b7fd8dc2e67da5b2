#!/usr/bin/env bash
# The project's one test command (README: `make test`; CI: .ci/run).
# Installs and starts Redis and Kafka, then runs go vet, every test with the
# race detector against those real services, and each fuzz target for
# FUZZTIME (20s by default).
set -euo pipefail
cd "$(dirname "$0")/.."
FUZZTIME=${FUZZTIME:-20s}

bash scripts/services.sh start

echo "== gofmt"
unformatted=$(gofmt -l $(git ls-files '*.go' 2>/dev/null || find . -name '*.go'))
if [[ -n $unformatted ]]; then
  echo "gofmt would change:"; echo "$unformatted"; exit 1
fi
echo "== go vet ./..."
go vet ./...
echo "== go test -race ./..."
go test -race -count=1 -timeout 25m ./...

echo "== fuzz targets, ${FUZZTIME} each"
# Every `func FuzzX` in a _test.go file, run in its own package directory.
while IFS=: read -r file name; do
  pkg=./$(dirname "$file")
  echo "-- $pkg $name"
  go test -run='^$' -fuzz="^${name}\$" -fuzztime="$FUZZTIME" "$pkg"
done < <(grep -rEo --include='*_test.go' '^func Fuzz[A-Za-z0-9_]+' . | sed -E 's/^\.\///; s/:func /:/' | sort -u)
echo "== all tests passed"
