#!/usr/bin/env bash
# Runs schemathesis against a live ingest: every operation of
# cmd/ingest/openapi.yaml, every check, a bounded number of generated
# requests each. Any disagreement between the description and what the
# server answers fails the run.
#
#   scripts/schemathesis.sh    (Kafka must be running: scripts/services.sh start)
#
# schemathesis and its dependencies are pinned in
# scripts/schemathesis/requirements.txt and installed once into a venv
# under $NOFLY_CACHE. ingest is built from the tree, started on a free
# loopback port with a topic of its own (it creates the topic), and stopped
# by PID. SCHEMATHESIS_EXAMPLES (default 200) bounds the requests per
# operation and phase; SCHEMATHESIS_SEED (default fixed) makes a run
# repeatable, so a failure in CI is one a developer can replay.
set -euo pipefail
source "$(dirname "$0")/common.sh"
cd "$SCRIPTS_DIR/.."

REQS=$SCRIPTS_DIR/schemathesis/requirements.txt
SKEW_AHEAD=600 # seconds; ingest's --max-clock-skew-ahead, which the hooks must know
# The file, not $URL/openapi.yaml: schemathesis leaves out the operation
# that serves the schema it loaded, and that one is described too (the Go
# test checks that the served document is this file).
SPEC=$PWD/cmd/ingest/openapi.yaml
BROKERS=${NOFLY_KAFKA_BROKERS:-127.0.0.1:9092}
EXAMPLES=${SCHEMATHESIS_EXAMPLES:-200}
SEED=${SCHEMATHESIS_SEED:-15}

# pick_python prints a Python 3.12 or later when the machine has one:
# under CPython 3.11, Hypothesis (inside schemathesis) now and then fails a
# run with "SystemError: AST constructor recursion depth mismatch", a
# CPython bug (python/cpython#106905), not a finding.
pick_python() {
  local c v
  for c in python3.13 python3.12 python3; do
    if "$c" -c 'import sys; sys.exit(sys.version_info < (3, 12))' 2>/dev/null; then command -v "$c"; return; fi
  done
  if command -v pyenv >/dev/null; then
    for v in $(pyenv versions --bare 2>/dev/null | grep -E '^3\.1[2-9]' | sort -V -r); do
      c=$(pyenv root)/versions/$v/bin/python3
      if [[ -x $c ]]; then echo "$c"; return; fi
    done
  fi
  command -v python3 >/dev/null || apt_install python3 python3-venv
  log "warning: no Python 3.12+; schemathesis may fail spuriously under $(python3 --version) (python/cpython#106905)"
  command -v python3
}

install_venv() {
  [[ -f $VENV/.complete ]] && return 0
  rm -rf "$VENV"
  # Debian's python3 needs python3-venv for ensurepip.
  "$PYTHON" -m venv "$VENV" 2>/dev/null || { apt_install python3-venv; "$PYTHON" -m venv "$VENV"; }
  log "installing schemathesis into $VENV"
  "$VENV/bin/pip" install -q --disable-pip-version-check -r "$REQS" || die "pip could not install $REQS"
  touch "$VENV/.complete"
}

free_port() { "$VENV/bin/python" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }

PYTHON=$(pick_python)
VENV=$NOFLY_CACHE/venv-schemathesis-$(sha256sum "$REQS" | cut -c1-12)-py$("$PYTHON" -c 'import sys; print("%d.%d" % sys.version_info[:2])')
install_venv
work=$(mktemp -d)
PIDFILE=$work/ingest.pid
TOPIC=nofly-schemathesis-$(od -An -N4 -tx4 /dev/urandom | tr -d ' ')
PORT=$(free_port)
URL=http://127.0.0.1:$PORT

cleanup() {
  stop_pid "$PIDFILE" "$work/ingest" 30
  # The topic is this run's alone; deleting it keeps the broker tidy.
  local libs
  if libs=$(bash "$SCRIPTS_DIR/kafka.sh" libs 2>/dev/null); then
    java -cp "$libs/*" org.apache.kafka.tools.TopicCommand --bootstrap-server "${BROKERS%%,*}" \
      --delete --topic "$TOPIC" >/dev/null 2>&1 || log "could not delete topic $TOPIC"
  fi
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

for ((i = 0; i < 600; i++)); do
  curl -fsS "$URL/readyz" >/dev/null 2>&1 && break
  pid_alive "$PIDFILE" "$work/ingest" || { cat "$work/ingest.log" >&2; die "ingest exited before it was ready"; }
  sleep 0.1
done
curl -fsS "$URL/readyz" >/dev/null || { cat "$work/ingest.log" >&2; die "ingest not ready after 60s"; }
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
