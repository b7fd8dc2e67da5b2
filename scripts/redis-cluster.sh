#!/usr/bin/env bash
# Starts, checks, kills and stops a Redis Cluster on 127.0.0.1 with Debian's
# redis-server (installed as scripts/redis.sh installs it): 3 primaries
# sharing the 16384 slots, and with REDIS_CLUSTER_REPLICAS=1 one replica
# each (6 nodes). Every node as scripts/redis.sh runs its server (AOF,
# appendfsync always, noeviction), with cluster-require-full-coverage yes
# and a short cluster-node-timeout so a failover takes seconds in a test.
#
#   scripts/redis-cluster.sh start [N]|stop [N]|status|kill N|restart N|logs N
#
# Nodes are numbered 1 to 3 (or 6) in the order of REDIS_CLUSTER_PORTS.
# `redis-cli --cluster create` makes the first three the primaries; start
# prints the roles as the nodes report them, which is what counts (after a
# failover they differ). `kill N` sends SIGKILL to node N (and waits until
# it is gone); `start N` / `restart N` start it again with its config and
# data (restart stops it first if it runs): it rejoins, a killed ex-primary
# as a replica of the node promoted in its place. start without N starts
# every node that is not running (on the first start, makes the cluster)
# and waits until the cluster has settled: every running node says
# cluster_state:ok, they all agree on who is primary of which slots and who
# replicates whom, every replica's link is up and in sync, and, with every
# node running, each primary has its replica.
#
# REDIS_CLUSTER_PORTS ("p1,p2,p3" or six of them; 27001.. by default),
# REDIS_CLUSTER_BUS_PORTS (the cluster bus ports, each port+10000 by
# default) and REDIS_CLUSTER_DIR let a test run a cluster of its own;
# REDIS_CLUSTER_NODE_TIMEOUT (ms, 2000) is written into a node's config on
# its first start only. The layout (ports, replicas) is kept in the
# directory, so the other verbs need no settings but the directory's.
set -euo pipefail
source "$(dirname "$0")/common.sh"

# The settings asked for, checked against the directory's layout below.
asked_replicas=${REDIS_CLUSTER_REPLICAS:-}
asked_ports=${REDIS_CLUSTER_PORTS:-}
asked_bus=${REDIS_CLUSTER_BUS_PORTS:-}
[[ -z $asked_replicas || $asked_replicas =~ ^[01]$ ]] || die "REDIS_CLUSTER_REPLICAS must be 0 or 1, not '$asked_replicas'"
first_port=27001
if [[ -n $asked_ports ]]; then first_port=${asked_ports%%,*}; fi
REDIS_CLUSTER_DIR=$(realpath -ms "${REDIS_CLUSTER_DIR:-"$NOFLY_CACHE/run/redis-cluster-$first_port"}")
LAYOUT=$REDIS_CLUSTER_DIR/layout
NODE_TIMEOUT=${REDIS_CLUSTER_NODE_TIMEOUT:-2000}
[[ $NODE_TIMEOUT =~ ^[1-9][0-9]*$ ]] || die "REDIS_CLUSTER_NODE_TIMEOUT must be milliseconds, not '$NODE_TIMEOUT'"

# The layout: from the directory once a start wrote it there (anything asked
# must then match it), else from the settings and their defaults.
if [[ -s $LAYOUT ]]; then
  read -r REPLICAS PORTS_CSV BUS_CSV <"$LAYOUT"
  if [[ -n $asked_replicas && $asked_replicas != "$REPLICAS" ]] ||
    [[ -n $asked_ports && $asked_ports != "$PORTS_CSV" ]] ||
    [[ -n $asked_bus && $asked_bus != "$BUS_CSV" ]]; then
    die "$REDIS_CLUSTER_DIR holds a cluster on ports $PORTS_CSV (bus $BUS_CSV, replicas $REPLICAS), not the one asked for; stop it and remove the directory, or set REDIS_CLUSTER_DIR"
  fi
else
  if [[ -n $asked_ports ]]; then
    PORTS_CSV=$asked_ports
    IFS=, read -r -a p <<<"$PORTS_CSV"
    if [[ -z $asked_replicas ]]; then
      # Six ports say one replica each as plainly as REDIS_CLUSTER_REPLICAS=1.
      REPLICAS=0
      ((${#p[@]} != 6)) || REPLICAS=1
    else
      REPLICAS=$asked_replicas
    fi
  else
    REPLICAS=${asked_replicas:-0}
    if ((REPLICAS)); then PORTS_CSV=27001,27002,27003,27004,27005,27006; else PORTS_CSV=27001,27002,27003; fi
  fi
  if [[ -n $asked_bus ]]; then
    BUS_CSV=$asked_bus
  else
    IFS=, read -r -a p <<<"$PORTS_CSV"
    BUS_CSV=
    for q in "${p[@]}"; do
      [[ $q =~ ^[0-9]+$ ]] || die "REDIS_CLUSTER_PORTS: '$q' is not a port"
      BUS_CSV+=${BUS_CSV:+,}$((q + 10000))
    done
  fi
fi
IFS=, read -r -a PORTS <<<"$PORTS_CSV"
IFS=, read -r -a BUS_PORTS <<<"$BUS_CSV"
NODES=$((3 * (1 + REPLICAS)))
((${#PORTS[@]} == NODES)) || die "REDIS_CLUSTER_PORTS needs $NODES ports with REDIS_CLUSTER_REPLICAS=$REPLICAS, not ${#PORTS[@]} ($PORTS_CSV)"
((${#BUS_PORTS[@]} == NODES)) || die "REDIS_CLUSTER_BUS_PORTS needs $NODES ports, not ${#BUS_PORTS[@]} ($BUS_CSV)"
for q in "${PORTS[@]}" "${BUS_PORTS[@]}"; do
  [[ $q =~ ^[0-9]+$ ]] && ((q > 0 && q < 65536)) || die "'$q' is not a port (a bus port is port+10000 unless REDIS_CLUSTER_BUS_PORTS says)"
done

node_dir() { echo "$REDIS_CLUSTER_DIR/node-$1"; }
port() { echo "${PORTS[$(($1 - 1))]}"; }
bus_port() { echo "${BUS_PORTS[$(($1 - 1))]}"; }
pidfile() { echo "$(node_dir "$1")/redis.pid"; }
logfile() { echo "$(node_dir "$1")/redis.log"; }
# The process title (proc-title-template below) names the node's config
# file, so a pid is matched to this node of this cluster, never another.
pattern() { echo "redis-server 127.0.0.1:$(port "$1") $(node_dir "$1")/redis.conf"; }
alive() { pid_alive "$(pidfile "$1")" "$(pattern "$1")"; }
check_node() { [[ ${1:-} =~ ^[1-9]$ ]] && (($1 <= NODES)) || die "node must be 1 to $NODES, not '${1:-}'"; }
all_nodes() { seq 1 "$NODES"; }

# cli N ARGS...: redis-cli against node N, bounded (a stopped process would
# hang it), its reply without the \r of Redis' line ends.
cli() {
  local n=$1
  shift
  { timeout 5 redis-cli -h 127.0.0.1 -p "$(port "$n")" "$@" 2>/dev/null || true; } | tr -d '\r'
}
ping() { cli "$1" ping | grep -q '^PONG$'; }
field() { cli "$1" "$2" "${3:-}" | sed -n "s/^$4://p"; }

# view N: the cluster as node N sees it, one line per node, sorted:
# "PORT primary SLOTS" or "PORT replica of PORT", " down" added to a node
# flagged fail or fail?; "handshake" for a node still being met. Nodes that
# agree print the same lines.
view() {
  cli "$1" cluster nodes | awk '
    NF >= 8 {
      split($2, a, "@"); k = split(a[1], b, ":"); port[$1] = b[k]
      id[NR] = $1; flags[NR] = $3; master[NR] = $4
      s = ""; for (i = 9; i <= NF; i++) s = s " " $i; slots[NR] = s
    }
    END {
      for (r in id) {
        f = flags[r]
        if (f ~ /handshake|noaddr/) { print "handshake"; continue }
        if (f ~ /master/) line = port[id[r]] " primary" slots[r]
        else line = port[id[r]] " replica of " port[master[r]]
        if (f ~ /fail/) line = line " down"
        print line
      }
    }' | sort
}

# node_of PORT: the node number of a port of this cluster.
node_of() {
  local n
  for n in $(all_nodes); do [[ $(port "$n") == "$1" ]] && { echo "$n"; return 0; }; done
  echo "?"
}

# describe N: node N's role in its own words, for start and status.
describe() {
  local n=$1 role mport link slots
  role=$(field "$n" info replication role)
  case $role in
    master)
      slots=$(view "$n" | awk -v p="$(port "$n")" '$1 == p && $2 == "primary" { $1 = $2 = ""; sub(/^ +/, ""); print }')
      echo "primary of slots ${slots:-none}, cluster_state $(field "$n" cluster info cluster_state)" ;;
    slave)
      mport=$(field "$n" info replication master_port)
      link=$(field "$n" info replication master_link_status)
      echo "replica of node $(node_of "$mport") (127.0.0.1:$mport), link $link, cluster_state $(field "$n" cluster info cluster_state)" ;;
    *) echo "not answering" ;;
  esac
}

# settled: the running nodes form a settled cluster (see the top); WHY says
# what is still missing when it is not.
WHY=
settled() {
  local n live=() v first= role primaries p
  for n in $(all_nodes); do if alive "$n"; then live+=("$n"); fi; done
  ((${#live[@]})) || { WHY="no node is running"; return 1; }
  for n in "${live[@]}"; do
    [[ $(field "$n" cluster info cluster_state) == ok ]] || { WHY="node $n: cluster_state is not ok"; return 1; }
    v=$(view "$n")
    [[ -n $v ]] || { WHY="node $n: no answer to CLUSTER NODES"; return 1; }
    if [[ -z $first ]]; then
      first=$v
    elif [[ $v != "$first" ]]; then
      WHY="nodes ${live[0]} and $n do not agree on the cluster yet"
      return 1
    fi
    role=$(field "$n" info replication role)
    if [[ $role == slave ]]; then
      [[ $(field "$n" info replication master_link_status) == up ]] || { WHY="node $n: link to its primary is not up"; return 1; }
      [[ $(field "$n" info replication master_sync_in_progress) == 0 ]] || { WHY="node $n: still syncing from its primary"; return 1; }
    fi
  done
  grep -q handshake <<<"$first" && { WHY="a node is still in the handshake"; return 1; }
  primaries=$(awk '$2 == "primary" && NF > 2 && $NF != "down" { print $1 }' <<<"$first")
  (($(wc -w <<<"$primaries") == 3)) || { WHY="$(wc -w <<<"$primaries") primaries serve slots, not 3"; return 1; }
  if ((REPLICAS && ${#live[@]} == NODES)); then
    for p in $primaries; do
      grep -qE "^[0-9]+ replica of $p\$" <<<"$first" || { WHY="primary on $p has no replica"; return 1; }
    done
  fi
  return 0
}

# wait_settled N...: until settled; fails at once if one of the nodes
# given (those this run started or found running) exits.
wait_settled() {
  local i n
  for ((i = 0; i < 600; i++)); do
    for n in "$@"; do
      alive "$n" || { log "node $n exited; last log lines:"; tail -n 40 "$(logfile "$n")" >&2 || true; exit 1; }
    done
    settled && return 0
    sleep 0.2
  done
  log "the cluster did not settle in 120 s: $WHY; the nodes' views:"
  for n in $(all_nodes); do
    if alive "$n"; then { echo "node $n:"; view "$n"; } >&2; else echo "node $n: not running" >&2; fi
  done
  exit 1
}

install() {
  command -v redis-server >/dev/null && command -v redis-cli >/dev/null && return 0
  apt_install redis-server
}

# write_config N: node N's redis.conf, on its first start only: a restart
# keeps the config the node was made with.
write_config() {
  local n=$1 dir
  dir=$(node_dir "$n")
  mkdir -p "$dir"
  [[ -s $dir/redis.conf ]] && return 0
  cat >"$dir/redis.conf.tmp" <<CONF
bind 127.0.0.1
port $(port "$n")
dir "$dir"
daemonize yes
pidfile "$dir/redis.pid"
logfile "$dir/redis.log"
proc-title-template "{title} {listen-addr} {config-file}"
cluster-enabled yes
cluster-config-file nodes.conf
cluster-port $(bus_port "$n")
cluster-node-timeout $NODE_TIMEOUT
cluster-require-full-coverage yes
# As scripts/redis.sh: every acknowledged write on disk before the reply.
appendonly yes
appendfsync always
save ""
maxmemory-policy noeviction
CONF
  mv "$dir/redis.conf.tmp" "$dir/redis.conf"
}

# launch N: starts node N (unless it runs) and waits until it answers PING.
launch() {
  local n=$1 dir i
  dir=$(node_dir "$n")
  alive "$n" && return 0
  if ping "$n"; then
    die "something else answers on 127.0.0.1:$(port "$n"); stop it or set REDIS_CLUSTER_PORTS"
  fi
  write_config "$n"
  # A node killed with SIGKILL leaves its pid file behind; the wait below
  # must not read that dead pid as "the new node exited".
  rm -f "$(pidfile "$n")"
  echo "==== redis-cluster.sh start node $n $(date -u +%FT%TZ)" >>"$(logfile "$n")"
  redis-server "$dir/redis.conf" >/dev/null
  # A large AOF takes a while to load; PING answers LOADING until then.
  for ((i = 0; i < 900; i++)); do
    ping "$n" && return 0
    # The daemon writes its pid file a moment after the fork: give it 5 s.
    if ((i > 25)) || [[ -s $(pidfile "$n") ]]; then
      alive "$n" || break
    fi
    sleep 0.2
  done
  log "node $n did not answer PING on 127.0.0.1:$(port "$n") (it exited, or took over 180s); last log lines:"
  tail -n 30 "$(logfile "$n")" >&2 || true
  exit 1
}

# create: the first start. The nodes start empty and redis-cli makes them a
# cluster (it waits until they all agree on the configuration).
create() {
  local n hosts=()
  for n in $(all_nodes); do
    stop_pid "$(pidfile "$n")" "$(pattern "$n")" 30
    rm -rf "$(node_dir "$n")"
  done
  mkdir -p "$REDIS_CLUSTER_DIR"
  echo "$REPLICAS $PORTS_CSV $BUS_CSV" >"$LAYOUT"
  for n in $(all_nodes); do launch "$n"; done
  for n in $(all_nodes); do hosts+=("127.0.0.1:$(port "$n")"); done
  if ! timeout 120 redis-cli --cluster create "${hosts[@]}" --cluster-replicas "$REPLICAS" --cluster-yes \
    >"$REDIS_CLUSTER_DIR/create.log" 2>&1; then
    cat "$REDIS_CLUSTER_DIR/create.log" >&2
    die "redis-cli --cluster create failed (its output above, in $REDIS_CLUSTER_DIR/create.log)"
  fi
  touch "$REDIS_CLUSTER_DIR/created"
}

roles() {
  local n
  for n in $(all_nodes); do
    if alive "$n"; then
      log "node $n (127.0.0.1:$(port "$n")): $(describe "$n")"
    else
      log "node $n (127.0.0.1:$(port "$n")): not running"
    fi
  done
}

start() {
  local nodes=("$@") n launched=0 what="primaries"
  install
  ((REPLICAS == 0)) || what="primaries, one replica each"
  if [[ ! -f $REDIS_CLUSTER_DIR/created ]]; then
    ((${#nodes[@]} == 0)) || die "no cluster was made in $REDIS_CLUSTER_DIR yet; start all of it first"
    log "making a cluster of $NODES nodes (3 $what) in $REDIS_CLUSTER_DIR"
    create
    launched=1
    mapfile -t nodes < <(all_nodes)
  else
    ((${#nodes[@]})) || mapfile -t nodes < <(all_nodes)
    for n in "${nodes[@]}"; do
      alive "$n" && continue
      launch "$n"
      launched=1
    done
  fi
  wait_settled "${nodes[@]}"
  if ((launched && ${#nodes[@]} < NODES)); then
    log "redis cluster ready on 127.0.0.1 ports $PORTS_CSV with node ${nodes[*]} back (dir $REDIS_CLUSTER_DIR)"
  elif ((launched)); then
    log "redis cluster ready on 127.0.0.1 ports $PORTS_CSV (3 $what, node timeout $(awk '$1 == "cluster-node-timeout" { print $2 }' "$(node_dir 1)/redis.conf") ms, dir $REDIS_CLUSTER_DIR)"
  else
    log "redis cluster already running on 127.0.0.1 ports $PORTS_CSV (dir $REDIS_CLUSTER_DIR)"
  fi
  roles
}

stop() {
  local nodes=("$@") n
  ((${#nodes[@]})) || mapfile -t nodes < <(all_nodes)
  # All at once: SIGTERM makes a node fsync its AOF and exit; a primary
  # waits (shutdown-timeout) only for a replica that lags.
  for n in "${nodes[@]}"; do stop_pid "$(pidfile "$n")" "$(pattern "$n")" 30 & done
  wait
  log "redis cluster nodes ${nodes[*]} stopped"
}

kill_node() {
  local n=$1 pid i
  alive "$n" || die "node $n is not running"
  pid=$(<"$(pidfile "$n")")
  kill -KILL "$pid"
  # Gone means reaped or a zombie: pid_alive reads the command line, which
  # a zombie no longer has.
  for ((i = 0; i < 200; i++)); do
    alive "$n" || { echo "==== redis-cluster.sh SIGKILL node $n (pid $pid) $(date -u +%FT%TZ)" >>"$(logfile "$n")"; log "node $n (pid $pid) killed"; return 0; }
    sleep 0.05
  done
  die "node $n (pid $pid) still alive 10 s after SIGKILL"
}

status() {
  local n rc=0
  for n in $(all_nodes); do
    if alive "$n"; then
      echo "node $n: running on 127.0.0.1:$(port "$n") (pid $(<"$(pidfile "$n")")), $(describe "$n")"
    else
      echo "node $n: not running (127.0.0.1:$(port "$n"))"
      rc=1
    fi
  done
  return $rc
}

case ${1:-} in
  start) if [[ -n ${2:-} ]]; then check_node "$2"; start "$2"; else start; fi ;;
  stop) if [[ -n ${2:-} ]]; then check_node "$2"; stop "$2"; else stop; fi ;;
  kill) check_node "${2:-}"; kill_node "$2" ;;
  restart) check_node "${2:-}"; stop "$2"; start "$2" ;;
  status) status ;;
  logs) check_node "${2:-}"; tail -n "${LINES:-60}" "$(logfile "$2")" ;;
  *) echo "usage: $0 start [N]|stop [N]|status|kill N|restart N|logs N" >&2; exit 2 ;;
esac
