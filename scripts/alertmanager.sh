#!/usr/bin/env bash
# Installs (Debian's prometheus-alertmanager), starts, checks and stops an
# Alertmanager on 127.0.0.1, by PID, without HA gossip: the router the
# alerter's --alertmanager output posts alarms to (docs/operations.md,
# "Alarms to people: Alertmanager").
#
#   scripts/alertmanager.sh install|start|stop|restart|status|check|logs
#
# ALERTMANAGER_PORT (9095: 9093, Alertmanager's own default, is the Kafka
# controller's port in scripts/kafka.sh) and ALERTMANAGER_DIR (state: silences, the
# notification log, pid, log) let a test run a private instance.
# ALERTMANAGER_CONFIG is its configuration (default compose/alertmanager.yml,
# the sample routing, whose real receivers are commented out); `check`
# validates it with amtool. Debian's package also installs a system
# service on 9093 where a service manager runs; ours is started by PID and
# never relies on it.
set -euo pipefail
source "$(dirname "$0")/common.sh"

ALERTMANAGER_PORT=${ALERTMANAGER_PORT:-9095}
ALERTMANAGER_DIR=${ALERTMANAGER_DIR:-"$NOFLY_CACHE/run/alertmanager-$ALERTMANAGER_PORT"}
ALERTMANAGER_CONFIG=${ALERTMANAGER_CONFIG:-"$SCRIPTS_DIR/../compose/alertmanager.yml"}
PIDFILE=$ALERTMANAGER_DIR/alertmanager.pid
LOGFILE=$ALERTMANAGER_DIR/alertmanager.log
PATTERN="--web.listen-address=127.0.0.1:$ALERTMANAGER_PORT"
BIN=prometheus-alertmanager

ready() { curl -fsS -m 2 "http://127.0.0.1:$ALERTMANAGER_PORT/-/ready" >/dev/null 2>&1; }

install() {
  command -v "$BIN" >/dev/null && command -v amtool >/dev/null && command -v curl >/dev/null && return 0
  apt_install prometheus-alertmanager curl
}

check() {
  install
  amtool check-config "$ALERTMANAGER_CONFIG" >&2 || die "$ALERTMANAGER_CONFIG: amtool check-config failed"
}

start() {
  install
  if pid_alive "$PIDFILE" "$PATTERN" && ready; then
    log "alertmanager already running on 127.0.0.1:$ALERTMANAGER_PORT (pid $(<"$PIDFILE"))"
    return 0
  fi
  if ready; then
    die "something else answers on 127.0.0.1:$ALERTMANAGER_PORT; stop it or set ALERTMANAGER_PORT"
  fi
  [[ -r $ALERTMANAGER_CONFIG ]] || die "no configuration at $ALERTMANAGER_CONFIG"
  mkdir -p "$ALERTMANAGER_DIR/data"
  rm -f "$PIDFILE"
  # --cluster.listen-address= turns HA gossip off: no port 9094 taken and no
  # wait for peers to settle before the first notification.
  setsid "$BIN" --config.file="$ALERTMANAGER_CONFIG" \
    --storage.path="$ALERTMANAGER_DIR/data" \
    "$PATTERN" --cluster.listen-address= \
    --log.level=info >>"$LOGFILE" 2>&1 </dev/null &
  echo $! >"$PIDFILE"
  wait_ready alertmanager "$(<"$PIDFILE")" 30 "$LOGFILE" ready
  log "alertmanager ready on 127.0.0.1:$ALERTMANAGER_PORT (pid $(<"$PIDFILE"), config $ALERTMANAGER_CONFIG, dir $ALERTMANAGER_DIR)"
}

stop() { stop_pid "$PIDFILE" "$PATTERN" 20; log "alertmanager on $ALERTMANAGER_PORT stopped"; }

status() {
  if pid_alive "$PIDFILE" "$PATTERN" && ready; then
    echo "alertmanager: running on 127.0.0.1:$ALERTMANAGER_PORT (pid $(<"$PIDFILE"))"
  else
    echo "alertmanager: not running on 127.0.0.1:$ALERTMANAGER_PORT"
    return 1
  fi
}

case ${1:-} in
  install) install ;;
  start) start ;;
  stop) stop ;;
  restart) stop; start ;;
  status) status ;;
  check) check ;;
  logs) tail -n "${LINES:-50}" "$LOGFILE" ;;
  *) echo "usage: $0 install|start|stop|restart|status|check|logs" >&2; exit 2 ;;
esac
