#!/usr/bin/env bash
# Installs, starts, checks and stops one Apache Kafka node in KRaft mode
# (broker and controller in one JVM) on 127.0.0.1, from the jars published on
# Maven Central, run with the machine's Java. No Kafka tarball, no Docker.
#
#   scripts/kafka.sh install|start|stop|restart|status|logs|libs|cds
#
# (libs prints the jars' directory, cds the class-data archive's path.)
#
# KAFKA_VERSION picks the release (one variable: run the suite against another
# with KAFKA_VERSION=3.9.1 make test). KAFKA_PORT / KAFKA_CONTROLLER_PORT /
# KAFKA_DIR let a test run a private broker it may restart at will, and
# KAFKA_EXTRA_PROPS (lines of server.properties) give it settings of its own.
#
# KAFKA_SECURE_DIR adds a SASL_SSL listener on 127.0.0.1:KAFKA_SECURE_PORT
# (default KAFKA_PORT+2) beside the PLAINTEXT one, which the controller and
# inter-broker traffic keep on loopback. DIR gets the certificates of
# scripts/certs.sh (the broker's is server.pem; a client certificate is
# optional but verified when presented: ssl.client.auth=requested) and
# DIR/kafka.password (0600, made at the first start unless present), the
# password of KAFKA_SASL_USER (default nofly) for PLAIN, SCRAM-SHA-256 and
# SCRAM-SHA-512. The SCRAM credentials are written when the storage is
# formatted, so the secure listener must be asked for at a data dir's first
# start. With KAFKA_SECURE_DIR the ACL authorizer is on (no ACL, no access):
# the PLAINTEXT listener's User:ANONYMOUS (controller, inter-broker and the
# tests' admin on loopback) and KAFKA_SASL_USER are the super users, and
# each user of KAFKA_SASL_USERS ("nofly-ingest nofly-alerter" by default)
# gets a password file DIR/kafka-USER.password of its own and only the ACLs
# a test grants it (docs/operations.md, Least privilege).
set -euo pipefail
source "$(dirname "$0")/common.sh"

KAFKA_VERSION=${KAFKA_VERSION:-4.4.0}
KAFKA_PORT=${KAFKA_PORT:-9092}
KAFKA_CONTROLLER_PORT=${KAFKA_CONTROLLER_PORT:-$((KAFKA_PORT + 1))}
KAFKA_DIR=${KAFKA_DIR:-"$NOFLY_CACHE/run/kafka-$KAFKA_PORT"}
KAFKA_HEAP_OPTS=${KAFKA_HEAP_OPTS:-"-Xms256m -Xmx1g"}
# The jars' directory is named after the pom that resolved them, so a changed
# pom resolves into a new one and never deletes jars a running broker uses.
POM_HASH=$(sha256sum "$SCRIPTS_DIR/kafka/pom.xml" | cut -c1-12)
LIBS=$NOFLY_CACHE/kafka-$KAFKA_VERSION-$POM_HASH/libs
PIDFILE=$KAFKA_DIR/kafka.pid
LOGFILE=$KAFKA_DIR/server.log
PATTERN="kafka.Kafka $KAFKA_DIR/server.properties"
KAFKA_SECURE_DIR=${KAFKA_SECURE_DIR:-}
KAFKA_SECURE_PORT=${KAFKA_SECURE_PORT:-$((KAFKA_PORT + 2))}
KAFKA_SASL_USER=${KAFKA_SASL_USER:-nofly}
KAFKA_SASL_USERS=${KAFKA_SASL_USERS-nofly-ingest nofly-alerter}
SASL_USERS=()
# KAFKA_JVM_OPTS: JVM flags beyond the heap's. The tests' private brokers
# pass -XX:TieredStopAtLevel=1 (no C2 compiler: half the CPU to start, ample
# speed for a test's records); the shared broker keeps the full JIT, which
# the benchmarks measure.
KAFKA_JVM_OPTS=${KAFKA_JVM_OPTS:-}
# A class-data archive of the broker's classes (made once, see build_cds)
# takes a start from ~7 to ~2 CPU seconds. It is only valid for this
# classpath and this JVM, hence both in its name.
JAVA_ID=$(java -version 2>&1 | sha256sum | cut -c1-8) || JAVA_ID=none
CDS_ARCHIVE=$LIBS/../kafka-$JAVA_ID.jsa

install() {
  command -v java >/dev/null || die "java not found: Kafka runs on the machine's Java (17+)"
  apt_install kcat
  if [[ -f $LIBS/.complete ]]; then return 0; fi
  command -v mvn >/dev/null || die "mvn not found: it fetches Kafka's jars"
  log "fetching Apache Kafka $KAFKA_VERSION and its runtime dependencies with Maven into $LIBS"
  mkdir -p "$LIBS"
  # Maven's console output goes to a log: it is only worth reading on failure.
  mvn -q -B -Dstyle.color=never -f "$SCRIPTS_DIR/kafka/pom.xml" -Dkafka.version="$KAFKA_VERSION" \
    dependency:copy-dependencies -DincludeScope=runtime -DoutputDirectory="$LIBS" \
    >"$LIBS/../maven.log" 2>&1 \
    || { tail -n 30 "$LIBS/../maven.log" >&2; die "maven could not resolve org.apache.kafka:kafka_2.13:$KAFKA_VERSION"; }
  touch "$LIBS/.complete"
}

# cds_opts [broker]: the JVM flag that uses the class-data archive, if it exists;
# KAFKA_CDS_DUMP makes build_cds's own broker write it at exit instead. A JVM
# that cannot use an archive says so in stdout.log and starts without.
cds_opts() {
  if [[ -n ${KAFKA_CDS_DUMP:-} ]]; then [[ ${1:-} == broker ]] && echo "-XX:ArchiveClassesAtExit=$KAFKA_CDS_DUMP"
  elif [[ -s $CDS_ARCHIVE ]]; then echo "-XX:SharedArchiveFile=$CDS_ARCHIVE"
  fi
}

# build_cds: the archive, from a throwaway broker on a free port that is
# started and stopped (the JVM writes the archive on a clean exit), once per
# Kafka and JVM. A lock makes concurrent starts wait for one build. Failing
# to build is not fatal: brokers start without it, as before.
build_cds() {
  [[ -n ${KAFKA_CDS_DUMP:-} || -s $CDS_ARCHIVE ]] && return 0
  exec 8>"$CDS_ARCHIVE.lock"
  flock 8
  if [[ ! -s $CDS_ARCHIVE ]]; then
    local d port tmp=$CDS_ARCHIVE.tmp.$$
    d=$(mktemp -d "${TMPDIR:-/tmp}/kafka-cds.XXXXXX")
    for _ in $(seq 50); do
      port=$((20000 + RANDOM % 30000))
      if ! (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null && ! (exec 3<>"/dev/tcp/127.0.0.1/$((port + 1))") 2>/dev/null; then break; fi
    done
    log "making a class-data archive of the broker's classes (once per Kafka and JVM; later starts take a third of the CPU)"
    if KAFKA_DIR=$d KAFKA_PORT=$port KAFKA_CDS_DUMP=$tmp KAFKA_EXTRA_PROPS= KAFKA_SECURE_DIR= bash "$SCRIPTS_DIR/kafka.sh" start >"$d/cds.log" 2>&1 \
      && KAFKA_DIR=$d KAFKA_PORT=$port bash "$SCRIPTS_DIR/kafka.sh" stop >>"$d/cds.log" 2>&1 && [[ -s $tmp ]]; then
      mv "$tmp" "$CDS_ARCHIVE"
    else
      log "no class-data archive (brokers start without it): $(tail -n 3 "$d/cds.log" 2>/dev/null | tr '\n' ' ')"
      rm -f "$tmp"
    fi
    rm -rf "$d"
  fi
  exec 8>&-
}

metadata_ok() { kcat -b "127.0.0.1:$KAFKA_PORT" -L -m 3 >/dev/null 2>&1; }

# secure_ok: a metadata request over the SASL_SSL listener with PLAIN, so
# "ready" means TLS, the listener and the user work. Not SCRAM: Debian's kcat
# (librdkafka 2.0.2) fails SCRAM against this broker while kafka-go passes
# (the Go tests prove SCRAM). The password goes through a 0600 config file,
# never a command line.
secure_ok() {
  [[ -z $KAFKA_SECURE_DIR ]] && return 0
  kcat -F "$KAFKA_DIR/kcat-secure.conf" -b "127.0.0.1:$KAFKA_SECURE_PORT" -L -m 3 >/dev/null 2>&1
}

# prepare_secure: certificates, the password file, the broker's PEM key
# store (key and chain in one file) and kcat's client config.
prepare_secure() {
  [[ -z $KAFKA_SECURE_DIR ]] && return 0
  bash "$SCRIPTS_DIR/certs.sh" "$KAFKA_SECURE_DIR"
  local pwfile=$KAFKA_SECURE_DIR/kafka.password
  if [[ ! -s $pwfile ]]; then
    (umask 077; openssl rand -hex 24 >"$pwfile")
  fi
  chmod 0600 "$pwfile"
  SASL_PASSWORD=$(head -n 1 "$pwfile")
  [[ $SASL_PASSWORD =~ ^[A-Za-z0-9._~-]+$ ]] || die "$pwfile: the password must be [A-Za-z0-9._~-]+ (it is quoted into JAAS and SCRAM settings)"
  # The least-privilege users: name and password, one pair a line.
  SASL_USERS=()
  local u pw
  for u in $KAFKA_SASL_USERS; do
    [[ $u =~ ^[A-Za-z0-9._-]+$ ]] || die "KAFKA_SASL_USERS: '$u' is not a user name of [A-Za-z0-9._-]+"
    pwfile=$KAFKA_SECURE_DIR/kafka-$u.password
    [[ -s $pwfile ]] || (umask 077; openssl rand -hex 24 >"$pwfile")
    chmod 0600 "$pwfile"
    pw=$(head -n 1 "$pwfile")
    [[ $pw =~ ^[A-Za-z0-9._~-]+$ ]] || die "$pwfile: the password must be [A-Za-z0-9._~-]+"
    SASL_USERS+=("$u" "$pw")
  done
  mkdir -p "$KAFKA_DIR"
  (umask 077; cat "$KAFKA_SECURE_DIR/server.key" "$KAFKA_SECURE_DIR/server.pem" >"$KAFKA_DIR/server-keystore.pem")
  (umask 077; cat >"$KAFKA_DIR/kcat-secure.conf" <<CONF
security.protocol=SASL_SSL
sasl.mechanisms=PLAIN
sasl.username=$KAFKA_SASL_USER
sasl.password=$SASL_PASSWORD
ssl.ca.location=$KAFKA_SECURE_DIR/ca.pem
CONF
  )
}

# plain_users: the least-privilege users' entries of the PLAIN JAAS line.
plain_users() {
  local i
  for ((i = 0; i < ${#SASL_USERS[@]}; i += 2)); do printf ' user_%s="%s"' "${SASL_USERS[i]}" "${SASL_USERS[i + 1]}"; done
}

# write_config [FILE]: the broker's settings into FILE (default
# server.properties), and its log4j2 settings.
write_config() {
  local props=${1:-"$KAFKA_DIR/server.properties"}
  mkdir -p "$KAFKA_DIR/data"
  local listeners="PLAINTEXT://127.0.0.1:$KAFKA_PORT,CONTROLLER://127.0.0.1:$KAFKA_CONTROLLER_PORT"
  local advertised="PLAINTEXT://127.0.0.1:$KAFKA_PORT"
  local protocols="CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT"
  if [[ -n $KAFKA_SECURE_DIR ]]; then
    listeners+=",SASL_SSL://127.0.0.1:$KAFKA_SECURE_PORT"
    advertised+=",SASL_SSL://127.0.0.1:$KAFKA_SECURE_PORT"
    protocols+=",SASL_SSL:SASL_SSL"
  fi
  # The PLAIN password is in the properties: readable by the owner only.
  : >"$props"
  chmod 0600 "$props"
  cat >"$props" <<PROPS
process.roles=broker,controller
node.id=1
controller.quorum.voters=1@127.0.0.1:$KAFKA_CONTROLLER_PORT
listeners=$listeners
advertised.listeners=$advertised
controller.listener.names=CONTROLLER
inter.broker.listener.name=PLAINTEXT
listener.security.protocol.map=$protocols
log.dirs=$KAFKA_DIR/data
# The project creates its own topics with the partition counts from config;
# a typo in a topic name must fail, not create a 1-partition topic.
auto.create.topics.enable=false
num.partitions=1
# One node: internal topics cannot have more than one replica.
offsets.topic.replication.factor=1
offsets.topic.num.partitions=10
transaction.state.log.replication.factor=1
transaction.state.log.min.isr=1
share.coordinator.state.topic.replication.factor=1
share.coordinator.state.topic.min.isr=1
default.replication.factor=1
min.insync.replicas=1
# Tests start and stop consumers often; don't wait 3 s for more members.
group.initial.rebalance.delay.ms=0
# ... and kill them: a SIGKILLed member holds its partitions until its
# session times out, so the tests' alerters use 2 s sessions (Kafka's
# floor is 6 s by default; production keeps the alerter's 10 s).
group.min.session.timeout.ms=1000
log.retention.hours=24
log.segment.bytes=67108864
PROPS
  if [[ -n $KAFKA_SECURE_DIR ]]; then
    cat >>"$props" <<PROPS
# SASL_SSL for clients (scripts/kafka.sh KAFKA_SECURE_DIR): the mechanisms
# broker-wide and on the listener, each with its JAAS login module.
sasl.enabled.mechanisms=PLAIN,SCRAM-SHA-256,SCRAM-SHA-512
listener.name.sasl_ssl.sasl.enabled.mechanisms=PLAIN,SCRAM-SHA-256,SCRAM-SHA-512
listener.name.sasl_ssl.plain.sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required user_$KAFKA_SASL_USER="$SASL_PASSWORD"$(plain_users);
listener.name.sasl_ssl.scram-sha-256.sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required;
listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required;
listener.name.sasl_ssl.ssl.keystore.type=PEM
listener.name.sasl_ssl.ssl.keystore.location=$KAFKA_DIR/server-keystore.pem
listener.name.sasl_ssl.ssl.truststore.type=PEM
listener.name.sasl_ssl.ssl.truststore.location=$KAFKA_SECURE_DIR/ca.pem
listener.name.sasl_ssl.ssl.client.auth=requested
# Least privilege: the KRaft ACL authorizer, nothing allowed without an ACL
# but to the super users (the loopback PLAINTEXT listener's principal, which
# the controller and inter-broker traffic use, and KAFKA_SASL_USER).
authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer
allow.everyone.if.no.acl.found=false
super.users=User:ANONYMOUS;User:$KAFKA_SASL_USER
PROPS
  fi
  # A test may add or override settings (one per line), e.g. to build a
  # state the defaults forbid.
  if [[ -n ${KAFKA_EXTRA_PROPS:-} ]]; then printf '%s\n' "$KAFKA_EXTRA_PROPS" >>"$props"; fi
  cat >"$KAFKA_DIR/log4j2.properties" <<'PROPS'
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
  java $KAFKA_HEAP_OPTS $KAFKA_JVM_OPTS $(cds_opts) -Dkafka.logs.dir="$KAFKA_DIR" \
    -Dlog4j2.configurationFile="$KAFKA_DIR/log4j2.properties" \
    -cp "$LIBS/*" "$@"
}

start() {
  install
  if pid_alive "$PIDFILE" "$PATTERN" && metadata_ok; then
    # Reused only if it runs the settings this script writes now: a broker
    # started by an older checkout (say, before the tests' shorter sessions
    # were allowed) would fail tests in ways that do not name the cause.
    prepare_secure
    write_config "$KAFKA_DIR/server.properties.next"
    if cmp -s "$KAFKA_DIR/server.properties.next" "$KAFKA_DIR/server.properties"; then
      rm -f "$KAFKA_DIR/server.properties.next"
      log "kafka $KAFKA_VERSION already running on 127.0.0.1:$KAFKA_PORT (pid $(<"$PIDFILE"))"
      return 0
    fi
    log "kafka on $KAFKA_PORT runs other settings than this checkout writes; restarting it. The change:"
    diff "$KAFKA_DIR/server.properties" "$KAFKA_DIR/server.properties.next" | grep -v -i 'password\|jaas' >&2 || true
    rm -f "$KAFKA_DIR/server.properties.next"
    stop
  fi
  if ! pid_alive "$PIDFILE" "$PATTERN" && metadata_ok; then
    die "something else answers on 127.0.0.1:$KAFKA_PORT; stop it or set KAFKA_PORT"
  fi
  if ! pid_alive "$PIDFILE" "$PATTERN"; then
    build_cds
    prepare_secure
    write_config
    if [[ ! -f $KAFKA_DIR/data/meta.properties ]]; then
      local id scram=()
      id=$(kafka_cluster_id)
      # The SCRAM credentials go into the bootstrap metadata. StorageTool
      # takes them only as arguments: the password is on this one short-lived
      # command line (a loopback test broker's), and not in format.log.
      if [[ -n $KAFKA_SECURE_DIR ]]; then
        scram=(--add-scram "SCRAM-SHA-256=[name=$KAFKA_SASL_USER,password=$SASL_PASSWORD]"
          --add-scram "SCRAM-SHA-512=[name=$KAFKA_SASL_USER,password=$SASL_PASSWORD]")
        local i
        for ((i = 0; i < ${#SASL_USERS[@]}; i += 2)); do
          scram+=(--add-scram "SCRAM-SHA-256=[name=${SASL_USERS[i]},password=${SASL_USERS[i + 1]}]"
            --add-scram "SCRAM-SHA-512=[name=${SASL_USERS[i]},password=${SASL_USERS[i + 1]}]")
        done
      fi
      java_run kafka.tools.StorageTool format -t "$id" -c "$KAFKA_DIR/server.properties" "${scram[@]}" \
        >"$KAFKA_DIR/format.log" 2>&1 || { cat "$KAFKA_DIR/format.log" >&2; die "formatting KRaft storage failed"; }
    fi
    # Appended, not truncated: a restarted broker's log keeps what happened
    # before the stop.
    echo "==== kafka.sh start $(date -u +%FT%TZ)" >>"$LOGFILE"
    # shellcheck disable=SC2046
    nohup java $KAFKA_HEAP_OPTS -XX:+UseG1GC $KAFKA_JVM_OPTS $(cds_opts broker) -Dkafka.logs.dir="$KAFKA_DIR" \
      -Dlog4j2.configurationFile="$KAFKA_DIR/log4j2.properties" \
      -cp "$LIBS/*" kafka.Kafka "$KAFKA_DIR/server.properties" \
      >"$KAFKA_DIR/stdout.log" 2>&1 </dev/null &
    echo $! >"$PIDFILE"
  fi
  # A deadline, not a count of tries: a try that fails slowly (a TLS or
  # SASL check waiting out kcat's 3 s) must not stretch the wait.
  local deadline=$((SECONDS + 120))
  while ((SECONDS < deadline)); do
    if metadata_ok && secure_ok; then
      log "kafka $KAFKA_VERSION ready on 127.0.0.1:$KAFKA_PORT${KAFKA_SECURE_DIR:+ and SASL_SSL 127.0.0.1:$KAFKA_SECURE_PORT} (pid $(<"$PIDFILE"), dir $KAFKA_DIR)"
      return 0
    fi
    pid_alive "$PIDFILE" "$PATTERN" || break
    sleep 0.5
  done
  log "kafka did not answer a metadata request${KAFKA_SECURE_DIR:+ on both listeners}; last log lines:"
  tail -n 40 "$LOGFILE" "$KAFKA_DIR/stdout.log" >&2 || true
  exit 1
}

stop() { stop_pid "$PIDFILE" "$PATTERN" 60; log "kafka on $KAFKA_PORT stopped"; }

status() {
  if pid_alive "$PIDFILE" "$PATTERN" && metadata_ok; then
    echo "kafka: $KAFKA_VERSION running on 127.0.0.1:$KAFKA_PORT (pid $(<"$PIDFILE"))"
  else
    echo "kafka: not running on 127.0.0.1:$KAFKA_PORT"
    return 1
  fi
}

case ${1:-} in
  install) install ;;
  start) start ;;
  stop) stop ;;
  restart) stop; start ;;
  status) status ;;
  logs) tail -n "${LINES:-60}" "$LOGFILE" ;;
  libs) install >&2; echo "$LIBS" ;;
  cds) install >&2; build_cds >&2; if [[ -s $CDS_ARCHIVE ]]; then echo "$CDS_ARCHIVE"; fi ;;
  *) echo "usage: $0 install|start|stop|restart|status|logs|libs|cds" >&2; exit 2 ;;
esac
