#!/usr/bin/env bash
# Builds (from the Go module proxy), starts, checks and stops Dex, a real
# OpenID Connect provider, on 127.0.0.1, by PID: the identity provider of
# the single sign-on tests (dashboard/dex_browser_test.go) and of a local
# try-out of --oidc-issuer (docs/operations.md, "Sign-in").
#
#   scripts/dex.sh install|start|stop|restart|status|logs|config
#
# Dex's v2 tags are not usable as a Go module (its go.mod says
# github.com/dexidp/dex and replaces its api/v2 submodule with a path), so
# `go install` cannot build it: install writes a throwaway module in the
# cache that requires the pinned pseudo-version (and api/v2 at the same
# commit) and builds cmd/dex from it, once; go.sum is checked against the
# checksum database as for every other module. Built without cgo: the
# memory storage needs no SQLite, so its C is not compiled. Build cost:
# see docs/testing.md.
#
# DEX_PORT (5556) and DEX_DIR (state: config, pid, log) let a test run a
# private instance; the issuer is http://127.0.0.1:$DEX_PORT/dex. The
# configuration is compose/dex.yaml with the port, the redirect URIs
# (DEX_REDIRECT_URIS, space separated; default the alerter's default
# http://127.0.0.1:9102/auth/callback) and the token lifetime (DEX_ID_TOKEN_TTL,
# 5m) put in; the client secret is the first line of DEX_CLIENT_SECRET_FILE
# (default compose/dex-client-secret.sample), handed to Dex in its
# environment (secretEnv), never on a command line or in the config file.
# DEX_CONFIG=FILE runs a configuration of your own instead.
set -euo pipefail
source "$(dirname "$0")/common.sh"

# Pinned: `go list -m github.com/dexidp/dex@master` on 2026-12-06.
DEX_VERSION=v0.0.0-20260806151424-ab64ed778070
DEX_API_VERSION=v2.4.1-0.20260806151424-ab64ed778070
DEX_BUILD=$NOFLY_CACHE/dex-${DEX_VERSION##*-}
BIN=$DEX_BUILD/dex

DEX_PORT=${DEX_PORT:-5556}
DEX_DIR=${DEX_DIR:-"$NOFLY_CACHE/run/dex-$DEX_PORT"}
DEX_REDIRECT_URIS=${DEX_REDIRECT_URIS:-http://127.0.0.1:9102/auth/callback}
DEX_ID_TOKEN_TTL=${DEX_ID_TOKEN_TTL:-5m}
DEX_CLIENT_SECRET_FILE=${DEX_CLIENT_SECRET_FILE:-"$SCRIPTS_DIR/../compose/dex-client-secret.sample"}
DEX_CONFIG=${DEX_CONFIG:-}
PIDFILE=$DEX_DIR/dex.pid
LOGFILE=$DEX_DIR/dex.log
ISSUER=http://127.0.0.1:$DEX_PORT/dex
# Dex's command line names only the config file: the per-port config path
# tells our instance from another's.
PATTERN="$DEX_DIR/config.yaml"

ready() { curl -fsS -m 2 "$ISSUER/.well-known/openid-configuration" >/dev/null 2>&1; }

install() {
  command -v curl >/dev/null || apt_install curl
  [[ -x $BIN ]] && return 0
  command -v go >/dev/null || die "go is needed to build Dex"
  mkdir -p "$DEX_BUILD/src"
  cat >"$DEX_BUILD/src/go.mod" <<EOF
module nofly.local/dexbuild

go 1.25.8

require (
	github.com/dexidp/dex $DEX_VERSION
	github.com/dexidp/dex/api/v2 $DEX_API_VERSION
)
EOF
  cat >"$DEX_BUILD/src/tools.go" <<'EOF'
//go:build tools

// Package dexbuild only pins Dex's command for `go build`.
package dexbuild

import _ "github.com/dexidp/dex/cmd/dex"
EOF
  log "building Dex $DEX_VERSION from the Go module proxy into $DEX_BUILD (once; about 2 min of CPU)"
  local start=$SECONDS
  # Bounded: a proxy that stalls fails the step instead of CI's whole budget.
  (cd "$DEX_BUILD/src" && GOFLAGS=-mod=mod timeout 600 go mod tidy &&
    CGO_ENABLED=0 timeout 900 go build -o "$BIN.tmp" github.com/dexidp/dex/cmd/dex) >&2 ||
    die "building Dex failed (or took over 10 min to resolve, 15 to build)"
  mv "$BIN.tmp" "$BIN"
  log "Dex built in $((SECONDS - start))s: $BIN ($(du -h "$BIN" | cut -f1))"
}

# config writes the configuration this instance runs to DEX_DIR/config.yaml.
config() {
  mkdir -p "$DEX_DIR"
  if [[ -n $DEX_CONFIG ]]; then
    cp "$DEX_CONFIG" "$PATTERN"
    return 0
  fi
  local uris="" u
  for u in $DEX_REDIRECT_URIS; do uris+="      - '$u'"$'\n'; done
  awk -v port="$DEX_PORT" -v ttl="$DEX_ID_TOKEN_TTL" -v uris="$uris" '
    /^ *# @redirect-uris/ { printf "%s", uris; next }
    { gsub(/@port@/, port); gsub(/@id-token-ttl@/, ttl); print }
  ' "$SCRIPTS_DIR/../compose/dex.yaml" >"$PATTERN"
}

start() {
  install
  if pid_alive "$PIDFILE" "$PATTERN" && ready; then
    log "dex already running: $ISSUER (pid $(<"$PIDFILE"))"
    return 0
  fi
  if ready; then
    die "something else answers on 127.0.0.1:$DEX_PORT; stop it or set DEX_PORT"
  fi
  [[ -r $DEX_CLIENT_SECRET_FILE ]] || die "no client secret at $DEX_CLIENT_SECRET_FILE (DEX_CLIENT_SECRET_FILE)"
  config
  rm -f "$PIDFILE"
  NOFLY_DEX_CLIENT_SECRET=$(head -n 1 "$DEX_CLIENT_SECRET_FILE") \
    setsid "$BIN" serve "$PATTERN" >>"$LOGFILE" 2>&1 </dev/null &
  echo $! >"$PIDFILE"
  wait_ready dex "$(<"$PIDFILE")" 30 "$LOGFILE" ready
  log "dex ready: $ISSUER (pid $(<"$PIDFILE"), dir $DEX_DIR)"
}

stop() { stop_pid "$PIDFILE" "$PATTERN" 20; log "dex on $DEX_PORT stopped"; }

status() {
  if pid_alive "$PIDFILE" "$PATTERN" && ready; then
    echo "dex: running, issuer $ISSUER (pid $(<"$PIDFILE"))"
  else
    echo "dex: not running on 127.0.0.1:$DEX_PORT"
    return 1
  fi
}

case ${1:-} in
  install) install ;;
  start) start ;;
  stop) stop ;;
  restart) stop; start ;;
  status) status ;;
  config) config; cat "$PATTERN" ;;
  logs) tail -n "${LINES:-50}" "$LOGFILE" ;;
  *) echo "usage: $0 install|start|stop|restart|status|logs|config" >&2; exit 2 ;;
esac
