#!/usr/bin/env bash
# Installs (Debian's prometheus package, unpacked into the cache), starts,
# checks and stops a Prometheus server on 127.0.0.1 by PID, with nofly's
# alert rules (deploy/prometheus/nofly-rules.yml) loaded by the default
# configuration; and checks and unit-tests the rules with promtool.
#
#   scripts/prometheus.sh install|start [CONFIG]|stop|restart [CONFIG]|status|reload|logs
#   scripts/prometheus.sh path prometheus|promtool   # prints the binary's path (never installs)
#   scripts/prometheus.sh rules                      # promtool check rules + test rules
#
# PROMETHEUS_PORT (9090) and PROMETHEUS_DIR (state: the TSDB, pid, log) let
# a test run a private server. PROMETHEUS_CONFIG (or start's argument) is
# its configuration, default deploy/prometheus/prometheus.yml (scrapes an
# ingest on :8080 and an alerter on :9102, evaluates the rules every 15 s).
# PROMETHEUS_RETENTION (15d) bounds the TSDB.
#
# The package is not installed system-wide: `apt-get download` and
# `dpkg -x` put its files under $NOFLY_CACHE/prometheus-deb (no root
# needed once the package lists are there), so no system service starts
# on 9090, no user is created and none of the web UI's JavaScript packages
# come with it. Its binaries link only libc. A prometheus and a
# promtool already on PATH are used instead when the cache has none.
set -euo pipefail
source "$(dirname "$0")/common.sh"

REPO=$(cd "$SCRIPTS_DIR/.." && pwd)
PROMETHEUS_PORT=${PROMETHEUS_PORT:-9090}
PROMETHEUS_DIR=${PROMETHEUS_DIR:-"$NOFLY_CACHE/run/prometheus-$PROMETHEUS_PORT"}
PROMETHEUS_CONFIG=${PROMETHEUS_CONFIG:-"$REPO/deploy/prometheus/prometheus.yml"}
PROMETHEUS_RETENTION=${PROMETHEUS_RETENTION:-15d}
DEB_DIR=$NOFLY_CACHE/prometheus-deb
PIDFILE=$PROMETHEUS_DIR/prometheus.pid
LOGFILE=$PROMETHEUS_DIR/prometheus.log
# The listen address comes first on the command line, so this names our
# server and no other (pid_alive matches the command line).
PATTERN="prometheus --web.listen-address=127.0.0.1:$PROMETHEUS_PORT"

install_hint="install it with: bash scripts/prometheus.sh install (Debian's prometheus package, unpacked into $DEB_DIR; scripts/test.sh does this)"

# bin NAME: the path of prometheus or promtool, from the cache or PATH.
bin() {
  if [[ -x $DEB_DIR/usr/bin/$1 ]]; then
    echo "$DEB_DIR/usr/bin/$1"
  elif command -v prometheus >/dev/null && command -v promtool >/dev/null; then
    command -v "$1"
  else
    return 1
  fi
}

ready() { curl -fsS -m 2 "http://127.0.0.1:$PROMETHEUS_PORT/-/ready" >/dev/null 2>&1; }

install() {
  if bin promtool >/dev/null; then
    command -v curl >/dev/null || apt_install curl
    return 0
  fi
  command -v curl >/dev/null || apt_install curl
  local sudo="" tmp version
  ((EUID == 0)) || sudo=sudo
  version=$(apt-cache policy prometheus 2>/dev/null | sed -n 's/^ *Candidate: //p')
  if [[ -z $version || $version == "(none)" ]]; then
    log "no candidate for Debian's prometheus package: updating the package lists"
    $sudo apt-get update -qq || die "apt-get update failed"
    version=$(apt-cache policy prometheus | sed -n 's/^ *Candidate: //p')
  fi
  [[ -n $version && $version != "(none)" ]] || die "apt has no prometheus package (Debian's main component, bookworm: 2.42)"
  tmp=$(mktemp -d)
  trap 'rm -rf "$tmp"; trap - RETURN' RETURN
  log "downloading Debian's prometheus $version"
  # apt's sandbox user cannot write to a private temporary directory.
  chmod 0755 "$tmp"
  (cd "$tmp" && apt-get download -qq "prometheus=$version" 2>&1 | grep -v '^W: Download is performed unsandboxed' >&2 || true)
  local deb
  deb=$(ls "$tmp"/prometheus_*.deb 2>/dev/null | head -n 1)
  [[ -n $deb ]] || die "apt-get download prometheus=$version failed"
  rm -rf "$DEB_DIR.tmp"
  mkdir -p "$DEB_DIR.tmp"
  dpkg -x "$deb" "$DEB_DIR.tmp" || die "dpkg -x $deb failed"
  "$DEB_DIR.tmp/usr/bin/prometheus" --version >/dev/null 2>&1 || die "the unpacked prometheus does not run"
  "$DEB_DIR.tmp/usr/bin/promtool" --version >/dev/null 2>&1 || die "the unpacked promtool does not run"
  rm -rf "$DEB_DIR"
  mv "$DEB_DIR.tmp" "$DEB_DIR"
  log "prometheus $version in $DEB_DIR/usr/bin (prometheus, promtool)"
}

start() {
  [[ -n ${1:-} ]] && PROMETHEUS_CONFIG=$1
  install
  if pid_alive "$PIDFILE" "$PATTERN" && ready; then
    log "prometheus already running on 127.0.0.1:$PROMETHEUS_PORT (pid $(<"$PIDFILE"))"
    return 0
  fi
  if ready; then
    die "something else answers on 127.0.0.1:$PROMETHEUS_PORT; stop it or set PROMETHEUS_PORT"
  fi
  [[ -r $PROMETHEUS_CONFIG ]] || die "no configuration at $PROMETHEUS_CONFIG"
  # The configuration and the rule files it names, checked before the
  # start: a bad rule file would only be logged by a running server.
  local out
  out=$("$(bin promtool)" check config "$PROMETHEUS_CONFIG" 2>&1) ||
    { echo "$out" >&2; die "$PROMETHEUS_CONFIG: promtool check config failed"; }
  mkdir -p "$PROMETHEUS_DIR/data"
  rm -f "$PIDFILE"
  # exec -a: the command line reads "prometheus --web.listen-address=…"
  # whatever the binary's path, so PATTERN finds it.
  setsid bash -c 'exec -a prometheus "$@"' _ "$(bin prometheus)" \
    --web.listen-address="127.0.0.1:$PROMETHEUS_PORT" \
    --config.file="$PROMETHEUS_CONFIG" \
    --storage.tsdb.path="$PROMETHEUS_DIR/data" \
    --storage.tsdb.retention.time="$PROMETHEUS_RETENTION" \
    --web.enable-lifecycle >>"$LOGFILE" 2>&1 </dev/null &
  local pid=$!
  echo "$pid" >"$PIDFILE"
  wait_ready prometheus "$pid" 60 "$LOGFILE" ready
  log "prometheus ready on 127.0.0.1:$PROMETHEUS_PORT (pid $pid, config $PROMETHEUS_CONFIG, dir $PROMETHEUS_DIR)"
}

stop() { stop_pid "$PIDFILE" "$PATTERN" 30; log "prometheus on $PROMETHEUS_PORT stopped"; }

status() {
  if pid_alive "$PIDFILE" "$PATTERN" && ready; then
    echo "prometheus: running on 127.0.0.1:$PROMETHEUS_PORT (pid $(<"$PIDFILE"))"
  else
    echo "prometheus: not running on 127.0.0.1:$PROMETHEUS_PORT"
    return 1
  fi
}

# reload: SIGHUP by PID re-reads the configuration and the rule files.
reload() {
  pid_alive "$PIDFILE" "$PATTERN" || die "prometheus is not running on 127.0.0.1:$PROMETHEUS_PORT"
  kill -HUP "$(<"$PIDFILE")"
  log "prometheus on $PROMETHEUS_PORT: configuration and rules reloaded (pid $(<"$PIDFILE"))"
}

# rules: promtool's syntax check and unit tests of nofly's rules.
rules() {
  install
  local promtool
  promtool=$(bin promtool)
  (cd "$REPO/deploy/prometheus" && "$promtool" check rules nofly-rules.yml && "$promtool" test rules nofly-rules.test.yml)
}

case ${1:-} in
  install) install ;;
  start) start "${2:-}" ;;
  stop) stop ;;
  restart) stop; start "${2:-}" ;;
  status) status ;;
  reload) reload ;;
  logs) tail -n "${LINES:-50}" "$LOGFILE" ;;
  rules) rules ;;
  path)
    [[ ${2:-} == prometheus || ${2:-} == promtool ]] || { echo "usage: $0 path prometheus|promtool" >&2; exit 2; }
    bin "$2" || die "$2 is not installed; $install_hint"
    ;;
  *) echo "usage: $0 install|start [CONFIG]|stop|restart [CONFIG]|status|reload|logs|rules|path prometheus|promtool" >&2; exit 2 ;;
esac
