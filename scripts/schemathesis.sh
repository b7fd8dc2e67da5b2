#!/usr/bin/env bash
# Runs schemathesis against a live ingest: every operation of
# internal/ingestd/openapi.yaml, every check, a bounded number of generated
# requests each. Any disagreement between the description and what the
# server answers fails the run.
#
#   scripts/schemathesis.sh    (Kafka must be running: scripts/services.sh start)
#
# schemathesis is pinned and installed as scripts/schemathesis-lib.sh
# says. ingest is built from the tree, started on a free loopback port with
# a topic of its own (it creates the topic), and stopped by PID.
# SCHEMATHESIS_EXAMPLES (default 200) bounds the requests per operation and
# phase; SCHEMATHESIS_SEED (default fixed) makes a run
# repeatable, so a failure in CI is one a developer can replay.
set -euo pipefail
source "$(dirname "$0")/common.sh"
cd "$SCRIPTS_DIR/.."

SKEW_AHEAD=600 # seconds; ingest's --max-clock-skew-ahead, which the hooks must know
# The file, not $URL/openapi.yaml: schemathesis leaves out the operation
# that serves the schema it loaded, and that one is described too (the Go
# test checks that the served document is this file).
SPEC=$PWD/internal/ingestd/openapi.yaml
BROKERS=${NOFLY_KAFKA_BROKERS:-127.0.0.1:9092}
EXAMPLES=${SCHEMATHESIS_EXAMPLES:-200}
SEED=${SCHEMATHESIS_SEED:-15}

source "$SCRIPTS_DIR/schemathesis-lib.sh"
work=$(mktemp -d)
PIDFILE=$work/ingest.pid
TOPIC=nofly-schemathesis-$(od -An -N4 -tx4 /dev/urandom | tr -d ' ')
PORT=$(free_port)
URL=http://127.0.0.1:$PORT

cleanup() {
  stop_pid "$PIDFILE" "$work/ingest" 30
  delete_topics "$TOPIC"
  rm -rf "$work"
}
trap cleanup EXIT

log "building cmd/ingest"
go build -o "$work/ingest" ./cmd/ingest
# With a feed key, as a deployment runs it: the description's bearer scheme
# then holds, and schemathesis checks that a request without it gets 401.
KEY=$("$work/ingest" feed-key --name schemathesis --append "$work/feeds")
"$work/ingest" serve --addr "127.0.0.1:$PORT" --brokers "$BROKERS" --topic "$TOPIC" --partitions 1 \
  --feed-keys "$work/feeds" --max-clock-skew-ahead "${SKEW_AHEAD}s" --log-level warn >"$work/ingest.log" 2>&1 &
echo $! >"$PIDFILE"

wait_ready ingest "$(<"$PIDFILE")" 60 "$work/ingest.log" curl -fs -o /dev/null "$URL/readyz"
log "ingest ready on $URL (topic $TOPIC); schemathesis $("$VENV/bin/schemathesis" --version | awk '{print $NF}'), $EXAMPLES examples, seed $SEED"

rc=0
# From $work, so nothing it writes lands in the tree.
start=$SECONDS
(cd "$work" && SCHEMATHESIS_HOOKS=hooks PYTHONPATH=$SCRIPTS_DIR/schemathesis NOFLY_ST_SKEW_AHEAD=$SKEW_AHEAD \
  "$VENV/bin/schemathesis" run "$SPEC" --url "$URL" -H "Authorization: Bearer $KEY" \
  --checks all --max-examples "$EXAMPLES" --seed "$SEED" --workers 2 \
  --generation-database none --request-timeout 15 --no-color) || rc=$?
if ((rc != 0)); then
  log "schemathesis found disagreements between openapi.yaml and the server (exit $rc); ingest's log:"
  tail -n 40 "$work/ingest.log" >&2
  exit "$rc"
fi
log "schemathesis: no disagreement in $((SECONDS - start))s"
