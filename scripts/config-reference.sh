#!/usr/bin/env bash
# Regenerates docs/configuration.md, the reference of every command's flags,
# from the commands' own -h output (internal/configref builds them and reads
# it). `--check` writes nothing and fails if the file is stale, as
# internal/configref's test does.
#
#   bash scripts/config-reference.sh [--check]
set -euo pipefail
cd "$(dirname "$0")/.."
case ${1:-} in
  "") go run ./internal/configref/gen ;;
  --check) go run ./internal/configref/gen -check ;;
  *) echo "usage: $0 [--check]" >&2; exit 2 ;;
esac
