# Shared helpers for the service scripts. Sourced, never run.
# Every path that holds downloads or state lives outside the repository.
NOFLY_CACHE=${NOFLY_CACHE:-"$HOME/.cache/nofly"}
SCRIPTS_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)

log() { printf '[%s] %s\n' "$(basename "$0")" "$*" >&2; }
die() { log "error: $*"; exit 1; }

# pid_alive PIDFILE PATTERN: the PID in PIDFILE is running and its command
# line contains PATTERN, so a recycled PID is never mistaken for our server.
pid_alive() {
  local pidfile=$1 pattern=$2 pid
  [[ -s $pidfile ]] || return 1
  pid=$(<"$pidfile")
  [[ -r /proc/$pid/cmdline ]] || return 1
  tr '\0' ' ' <"/proc/$pid/cmdline" | grep -q -- "$pattern"
}

# wait_ready NAME PID SECONDS LOGFILE CHECK...: runs CHECK every 0.1 s
# until it succeeds; if the process PID exits first or SECONDS pass, logs
# the end of LOGFILE and exits 1. By PID, not pid_alive: until its exec, a
# child started as `setsid BIN … &` or `BIN … &` still has setsid's or the
# shell's command line, and a check by pattern that early takes a starting
# server for a dead one.
wait_ready() {
  local name=$1 pid=$2 secs=$3 logfile=$4 i
  shift 4
  for ((i = 0; i < secs * 10; i++)); do
    "$@" && return 0
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.1
  done
  log "$name did not become ready (it exited, or took over ${secs}s); last log lines:"
  tail -n 30 "$logfile" >&2 || true
  exit 1
}

# stop_pid PIDFILE PATTERN SECONDS: TERM, wait, then KILL. By PID, never by name.
stop_pid() {
  local pidfile=$1 pattern=$2 secs=${3:-30} pid i
  pid_alive "$pidfile" "$pattern" || { rm -f "$pidfile"; return 0; }
  pid=$(<"$pidfile")
  kill -TERM "$pid" 2>/dev/null || true
  for ((i = 0; i < secs * 10; i++)); do
    pid_alive "$pidfile" "$pattern" || { rm -f "$pidfile"; return 0; }
    sleep 0.1
  done
  log "pid $pid did not stop in ${secs}s; killing"
  kill -KILL "$pid" 2>/dev/null || true
  rm -f "$pidfile"
}

# apt_install PKG...: installs Debian packages that are missing.
apt_install() {
  local missing=() p
  for p in "$@"; do dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p"); done
  ((${#missing[@]})) || return 0
  log "installing ${missing[*]} from Debian's packages"
  local sudo=""
  ((EUID == 0)) || sudo=sudo
  $sudo apt-get update -qq || die "apt-get update failed"
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${missing[@]}" >/dev/null || die "apt-get install ${missing[*]} failed"
}

# kafka_cluster_id prints a new KRaft cluster id the way Kafka's
# Uuid.randomUuid makes one — 16 random bytes, base64url without padding,
# never starting with '-' (which would read as an option) — without starting
# a JVM for StorageTool random-uuid (two seconds of CPU per fresh broker).
kafka_cluster_id() {
  local id
  while :; do
    id=$(head -c 16 /dev/urandom | base64 | tr '+/' '-_' | tr -d '=\n')
    [[ ${#id} -eq 22 && $id != -* ]] && break
  done
  printf '%s\n' "$id"
}
