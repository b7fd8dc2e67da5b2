#!/usr/bin/env bash
# Installs Debian's chromium for the dashboard's browser tests (dashboard/,
# driven by chromedp) and prints the path of its binary.
#
#   scripts/chromium.sh install|path
set -euo pipefail
source "$(dirname "$0")/common.sh"

find_chromium() {
  local c
  for c in chromium chromium-browser; do
    if command -v "$c" >/dev/null; then command -v "$c"; return 0; fi
  done
  return 1
}

install() {
  find_chromium >/dev/null && return 0
  apt_install chromium
  find_chromium >/dev/null || die "chromium is not on PATH after installing Debian's chromium"
}

case ${1:-} in
  install) install; log "chromium: $(find_chromium) ($("$(find_chromium)" --version 2>/dev/null || echo 'version unknown'))" ;;
  path) find_chromium || die "chromium is not installed: run scripts/chromium.sh install" ;;
  *) echo "usage: $0 install|path" >&2; exit 2 ;;
esac
