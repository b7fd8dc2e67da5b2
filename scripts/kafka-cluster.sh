#!/usr/bin/env bash
# Starts, checks, kills and stops a 3-node Apache Kafka KRaft cluster on
# 127.0.0.1 (each node broker and controller in one JVM, the three of them
# the controller quorum's static voters), with the jars and Java of
# scripts/kafka.sh. Replication as a real cluster runs it: replication
# factor 3 by default and for the internal topics, min.insync.replicas=2,
# unclean leader election off.
#
#   scripts/kafka-cluster.sh start [N]|stop [N]|status|kill N|restart N|logs N
#
# Nodes are numbered 1 to 3, their node.id. `kill N` sends SIGKILL to node N
# (and waits until it is gone); `start N` / `restart N` start it again on its
# data (restart stops it first if it runs) and wait until it sees 3
# brokers, so the other two must be running. start without N starts every
# node that is not running and waits until each sees 3 brokers.
#
# KAFKA_CLUSTER_PORTS / KAFKA_CLUSTER_CONTROLLER_PORTS ("p1,p2,p3") and
# KAFKA_CLUSTER_DIR let a test run a cluster of its own; KAFKA_EXTRA_PROPS
# (lines of server.properties) are added to every node's settings.
set -euo pipefail
source "$(dirname "$0")/common.sh"

KAFKA_CLUSTER_PORTS=${KAFKA_CLUSTER_PORTS:-29092,29093,29094}
KAFKA_CLUSTER_CONTROLLER_PORTS=${KAFKA_CLUSTER_CONTROLLER_PORTS:-29192,29193,29194}
IFS=, read -r -a PORTS <<<"$KAFKA_CLUSTER_PORTS"
IFS=, read -r -a CTL_PORTS <<<"$KAFKA_CLUSTER_CONTROLLER_PORTS"
((${#PORTS[@]} == 3 && ${#CTL_PORTS[@]} == 3)) || die "KAFKA_CLUSTER_PORTS and KAFKA_CLUSTER_CONTROLLER_PORTS need 3 ports each"
KAFKA_CLUSTER_DIR=${KAFKA_CLUSTER_DIR:-"$NOFLY_CACHE/run/kafka-cluster-${PORTS[0]}"}
# Three JVMs on a small machine.
KAFKA_HEAP_OPTS=${KAFKA_HEAP_OPTS:-"-Xms128m -Xmx512m"}
# Test nodes: no C2 compiler (half the CPU to start; see kafka.sh).
KAFKA_JVM_OPTS=${KAFKA_JVM_OPTS:-"-XX:TieredStopAtLevel=1"}
VOTERS="1@127.0.0.1:${CTL_PORTS[0]},2@127.0.0.1:${CTL_PORTS[1]},3@127.0.0.1:${CTL_PORTS[2]}"
BOOTSTRAP="127.0.0.1:${PORTS[0]},127.0.0.1:${PORTS[1]},127.0.0.1:${PORTS[2]}"

node_dir() { echo "$KAFKA_CLUSTER_DIR/node-$1"; }
port() { echo "${PORTS[$(($1 - 1))]}"; }
ctl_port() { echo "${CTL_PORTS[$(($1 - 1))]}"; }
pidfile() { echo "$(node_dir "$1")/kafka.pid"; }
pattern() { echo "kafka.Kafka $(node_dir "$1")/server.properties"; }
alive() { pid_alive "$(pidfile "$1")" "$(pattern "$1")"; }
check_node() { [[ ${1:-} =~ ^[123]$ ]] || die "node must be 1, 2 or 3, not '${1:-}'"; }

# The jars are kafka.sh's (same version, same pom), installed by it; only
# the verbs that start a JVM need them.
LIBS=
need_libs() {
  [[ -n $LIBS ]] && return 0
  LIBS=$(bash "$SCRIPTS_DIR/kafka.sh" libs)
  # kafka.sh's class-data archive (made once): a third of the CPU to start.
  local cds
  cds=$(bash "$SCRIPTS_DIR/kafka.sh" cds)
  if [[ -n $cds ]]; then KAFKA_JVM_OPTS+=" -XX:SharedArchiveFile=$cds"; fi
}

# brokers_seen N: how many brokers node N's metadata lists (0 if it does
# not answer). The metadata holds unfenced brokers only, so 3 means every
# node registered with the active controller and N caught up with it.
brokers_seen() {
  kcat -b "127.0.0.1:$(port "$1")" -L -m 3 2>/dev/null | grep -c '^  broker ' || true
}

write_config() {
  local n=$1 dir
  dir=$(node_dir "$n")
  mkdir -p "$dir/data"
  cat >"$dir/server.properties" <<PROPS
process.roles=broker,controller
node.id=$n
controller.quorum.voters=$VOTERS
listeners=PLAINTEXT://127.0.0.1:$(port "$n"),CONTROLLER://127.0.0.1:$(ctl_port "$n")
advertised.listeners=PLAINTEXT://127.0.0.1:$(port "$n")
controller.listener.names=CONTROLLER
inter.broker.listener.name=PLAINTEXT
listener.security.protocol.map=CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT
log.dirs=$dir/data
# As kafka.sh: topics are created by the project with their counts.
auto.create.topics.enable=false
num.partitions=1
# Replicated as in production: every topic and internal topic on all three
# nodes, an acks=all write on at least two, and no out-of-sync replica ever
# made leader (it would drop acknowledged records).
default.replication.factor=3
min.insync.replicas=2
unclean.leader.election.enable=false
offsets.topic.replication.factor=3
offsets.topic.num.partitions=10
transaction.state.log.replication.factor=3
transaction.state.log.min.isr=2
transaction.state.log.num.partitions=10
share.coordinator.state.topic.replication.factor=3
share.coordinator.state.topic.min.isr=2
# Tests start and stop consumers often; don't wait 3 s for more members.
group.initial.rebalance.delay.ms=0
# ... and kill them: a SIGKILLed member holds its partitions until its
# session times out, so the tests' alerters use 2 s sessions (Kafka's
# floor is 6 s by default; production keeps the alerter's 10 s).
group.min.session.timeout.ms=1000
log.retention.hours=24
log.segment.bytes=67108864
PROPS
  if [[ -n ${KAFKA_EXTRA_PROPS:-} ]]; then printf '%s\n' "$KAFKA_EXTRA_PROPS" >>"$dir/server.properties"; fi
  cat >"$dir/log4j2.properties" <<'PROPS'
rootLogger.level=INFO
rootLogger.appenderRef.file.ref=FILE
appender.file.type=File
appender.file.name=FILE
appender.file.fileName=${sys:kafka.logs.dir}/server.log
appender.file.layout.type=PatternLayout
appender.file.layout.pattern=[%d] %p %m (%c)%n
logger.kafka.name=kafka
logger.kafka.level=INFO
logger.state.name=state.change.logger
logger.state.level=WARN
PROPS
}

java_run() {
  # shellcheck disable=SC2086
  java $KAFKA_HEAP_OPTS $KAFKA_JVM_OPTS -cp "$LIBS/*" "$@"
}

# One cluster id for the three nodes, made once: a node formatted with
# another id would refuse to join.
cluster_id() {
  local f=$KAFKA_CLUSTER_DIR/cluster.id
  if [[ ! -s $f ]]; then
    mkdir -p "$KAFKA_CLUSTER_DIR"
    kafka_cluster_id >"$f.tmp"
    mv "$f.tmp" "$f"
  fi
  cat "$f"
}

# launch N: formats node N's storage on its first start, then starts its
# JVM in the background. Does not wait.
launch() {
  local n=$1 dir
  dir=$(node_dir "$n")
  if alive "$n"; then return 0; fi
  if kcat -b "127.0.0.1:$(port "$n")" -L -m 1 >/dev/null 2>&1; then
    die "something else answers on 127.0.0.1:$(port "$n"); stop it or set KAFKA_CLUSTER_PORTS"
  fi
  write_config "$n"
  if [[ ! -f $dir/data/meta.properties ]]; then
    java_run kafka.tools.StorageTool format -t "$(cluster_id)" -c "$dir/server.properties" \
      >"$dir/format.log" 2>&1 || { cat "$dir/format.log" >&2; die "formatting node $n's KRaft storage failed"; }
  fi
  # Appended: a restarted node's log keeps what happened before.
  echo "==== kafka-cluster.sh start node $n $(date -u +%FT%TZ)" >>"$dir/server.log"
  # shellcheck disable=SC2086
  nohup java $KAFKA_HEAP_OPTS -XX:+UseG1GC $KAFKA_JVM_OPTS -Dkafka.logs.dir="$dir" \
    -Dlog4j2.configurationFile="$dir/log4j2.properties" \
    -cp "$LIBS/*" kafka.Kafka "$dir/server.properties" \
    >"$dir/stdout.log" 2>&1 </dev/null &
  echo $! >"$(pidfile "$n")"
}

# wait_ready N...: until each node sees 3 brokers; fails if one dies.
wait_ready() {
  local i n pending
  for ((i = 0; i < 240; i++)); do
    pending=()
    for n in "$@"; do
      alive "$n" || { log "node $n exited; last log lines:"; tail -n 40 "$(node_dir "$n")/server.log" "$(node_dir "$n")/stdout.log" >&2 || true; exit 1; }
      (($(brokers_seen "$n") == 3)) || pending+=("$n")
    done
    ((${#pending[@]} == 0)) && return 0
    sleep 0.5
  done
  log "nodes ${pending[*]} do not see 3 brokers after 120 s; last log lines:"
  for n in "${pending[@]}"; do tail -n 40 "$(node_dir "$n")/server.log" >&2 || true; done
  exit 1
}

start() {
  local nodes=("$@") n
  ((${#nodes[@]})) || nodes=(1 2 3)
  need_libs
  for n in "${nodes[@]}"; do launch "$n"; done
  wait_ready "${nodes[@]}"
  log "kafka cluster ready on $BOOTSTRAP (nodes ${nodes[*]} started or running, dir $KAFKA_CLUSTER_DIR)"
}

stop() {
  local nodes=("$@") n
  ((${#nodes[@]})) || nodes=(1 2 3)
  # All at once: stopped one after another, the last nodes would wait for a
  # controller quorum that is already gone before they give up.
  for n in "${nodes[@]}"; do stop_pid "$(pidfile "$n")" "$(pattern "$n")" 60 & done
  wait
  log "kafka cluster nodes ${nodes[*]} stopped"
}

kill_node() {
  local n=$1 pid i
  alive "$n" || die "node $n is not running"
  pid=$(<"$(pidfile "$n")")
  kill -KILL "$pid"
  # Gone means reaped or a zombie: pid_alive reads the command line, which
  # a zombie no longer has.
  for ((i = 0; i < 200; i++)); do
    alive "$n" || { echo "==== kafka-cluster.sh SIGKILL node $n (pid $pid) $(date -u +%FT%TZ)" >>"$(node_dir "$n")/server.log"; log "node $n (pid $pid) killed"; return 0; }
    sleep 0.05
  done
  die "node $n (pid $pid) still alive 10 s after SIGKILL"
}

status() {
  local n rc=0
  for n in 1 2 3; do
    if alive "$n"; then
      echo "node $n: running on 127.0.0.1:$(port "$n") (pid $(<"$(pidfile "$n")")), sees $(brokers_seen "$n") brokers"
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
  logs) check_node "${2:-}"; tail -n "${LINES:-60}" "$(node_dir "$2")/server.log" ;;
  *) echo "usage: $0 start [N]|stop [N]|status|kill N|restart N|logs N" >&2; exit 2 ;;
esac
