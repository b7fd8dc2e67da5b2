#!/usr/bin/env bash
# Installs (Debian's redis-server), starts, checks and stops a Redis server on
# 127.0.0.1 with AOF and appendfsync always: the exactly-once argument needs
# every acknowledged script to survive a restart (docs/exactly-once.md).
#
#   scripts/redis.sh install|start|stop|restart|status|logs
#
# REDIS_PORT (6379) and REDIS_DIR (state dir) let a test run a private server.
#
# REDIS_SECURE_DIR serves REDIS_PORT over TLS only (port 0, tls-port), with
# the certificates of scripts/certs.sh DIR (a client certificate optional but
# verified: tls-auth-clients optional), the default user off and one ACL
# user, REDIS_USER (default nofly), with every permission and the password
# in DIR/redis.password (0600, made at the first start unless present).
set -euo pipefail
source "$(dirname "$0")/common.sh"

REDIS_PORT=${REDIS_PORT:-6379}
REDIS_DIR=${REDIS_DIR:-"$NOFLY_CACHE/run/redis-$REDIS_PORT"}
PIDFILE=$REDIS_DIR/redis.pid
LOGFILE=$REDIS_DIR/redis.log
PATTERN="redis-server 127.0.0.1:$REDIS_PORT"
REDIS_SECURE_DIR=${REDIS_SECURE_DIR:-}
REDIS_USER=${REDIS_USER:-nofly}

# ping: PING, in secure mode over TLS as the ACL user; the password reaches
# redis-cli through its environment, never its command line.
ping() {
  if [[ -n $REDIS_SECURE_DIR ]]; then
    [[ -r $REDIS_SECURE_DIR/redis.password ]] || return 1
    REDISCLI_AUTH=$(head -n 1 "$REDIS_SECURE_DIR/redis.password") redis-cli --no-auth-warning \
      --tls --cacert "$REDIS_SECURE_DIR/ca.pem" --user "$REDIS_USER" \
      -h 127.0.0.1 -p "$REDIS_PORT" ping 2>/dev/null | grep -q PONG
  else
    redis-cli -h 127.0.0.1 -p "$REDIS_PORT" ping 2>/dev/null | grep -q PONG
  fi
}

# secure_conf: the TLS and ACL settings, written to a 0600 file (it holds the
# password) that redis-server reads as its config file; prints its path.
secure_conf() {
  bash "$SCRIPTS_DIR/certs.sh" "$REDIS_SECURE_DIR"
  local pwfile=$REDIS_SECURE_DIR/redis.password pw conf=$REDIS_DIR/secure.conf
  if [[ ! -s $pwfile ]]; then
    (umask 077; openssl rand -hex 24 >"$pwfile")
  fi
  chmod 0600 "$pwfile"
  pw=$(head -n 1 "$pwfile")
  [[ $pw =~ ^[A-Za-z0-9._~-]+$ ]] || die "$pwfile: the password must be [A-Za-z0-9._~-]+ (it is written into an ACL rule)"
  : >"$conf"
  chmod 0600 "$conf"
  cat >"$conf" <<CONF
port 0
tls-port $REDIS_PORT
tls-cert-file $REDIS_SECURE_DIR/server.pem
tls-key-file $REDIS_SECURE_DIR/server.key
tls-ca-cert-file $REDIS_SECURE_DIR/ca.pem
tls-auth-clients optional
user default off
user $REDIS_USER on >$pw ~* &* +@all
CONF
  echo "$conf"
}

install() {
  command -v redis-server >/dev/null && command -v redis-cli >/dev/null && return 0
  apt_install redis-server
  # Debian's package starts a system server on 6379 where a service manager
  # runs; ours is started by PID below, so that one is not relied on.
}

start() {
  install
  if pid_alive "$PIDFILE" "$PATTERN" && ping; then
    log "redis already running on 127.0.0.1:$REDIS_PORT (pid $(<"$PIDFILE"))"
    return 0
  fi
  if ping; then
    die "something else answers on 127.0.0.1:$REDIS_PORT; stop it or set REDIS_PORT"
  fi
  mkdir -p "$REDIS_DIR"
  # A server killed with SIGKILL leaves its pid file behind; the wait below
  # must not read that dead pid as "the new server exited".
  rm -f "$PIDFILE"
  local conf=() what="redis"
  if [[ -n $REDIS_SECURE_DIR ]]; then
    conf=("$(secure_conf)")
    what="redis (TLS, ACL user $REDIS_USER)"
  else
    conf=(--port "$REDIS_PORT")
  fi
  redis-server "${conf[@]}" --bind 127.0.0.1 --dir "$REDIS_DIR" \
    --appendonly yes --appendfsync always --save "" \
    --daemonize yes --pidfile "$PIDFILE" --logfile "$LOGFILE" \
    --protected-mode yes >/dev/null
  # A large AOF takes a while to load; PING answers LOADING until then.
  local i
  for ((i = 0; i < 900; i++)); do
    if ping; then
      log "$what ready on 127.0.0.1:$REDIS_PORT (pid $(<"$PIDFILE"), AOF always, dir $REDIS_DIR)"
      return 0
    fi
    # The daemon writes its pid file a moment after the fork: give it 5 s.
    if ((i > 25)) || [[ -s $PIDFILE ]]; then
      pid_alive "$PIDFILE" "$PATTERN" || break
    fi
    sleep 0.2
  done
  log "redis did not answer PING (it exited, or took over 180s); last log lines:"
  tail -n 30 "$LOGFILE" >&2 || true
  exit 1
}

stop() { stop_pid "$PIDFILE" "$PATTERN" 20; log "redis on $REDIS_PORT stopped"; }

status() {
  if pid_alive "$PIDFILE" "$PATTERN" && ping; then
    echo "redis: running on 127.0.0.1:$REDIS_PORT (pid $(<"$PIDFILE"))"
  else
    echo "redis: not running on 127.0.0.1:$REDIS_PORT"
    return 1
  fi
}

case ${1:-} in
  install) install ;;
  start) start ;;
  stop) stop ;;
  restart) stop; start ;;
  status) status ;;
  logs) tail -n "${LINES:-50}" "$LOGFILE" ;;
  *) echo "usage: $0 install|start|stop|restart|status|logs" >&2; exit 2 ;;
esac
