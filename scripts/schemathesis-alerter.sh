#!/usr/bin/env bash
# Runs schemathesis against a live alerter: every operation of the merged
# API description (`alerter openapi`, api/openapi/*.yaml), every check, a
# bounded number of generated requests each, with real Kafka and Redis.
# Any disagreement between the description and what the server answers
# fails the run.
#
#   scripts/schemathesis-alerter.sh    (Kafka and Redis must be running: scripts/services.sh start)
#
# schemathesis is pinned and installed as scripts/schemathesis-lib.sh
# says. alerter is built from the tree and started on a free loopback port
# with a token file and topics, a consumer group and a Redis prefix of its
# own; recorded tracks (testdata/tracks/heathrow.ndjson) are sent through
# the scenario zones first, so the reads answer real alarms and events and
# the hooks know real alarm ids. It is stopped by PID and its topics and
# keys are deleted. SCHEMATHESIS_ALERTER_EXAMPLES (default 50) bounds the
# requests per operation and phase; SCHEMATHESIS_SEED (default fixed) makes
# a run repeatable, so a failure in CI is one a developer can replay.
set -euo pipefail
source "$(dirname "$0")/common.sh"
cd "$SCRIPTS_DIR/.."

BROKERS=${NOFLY_KAFKA_BROKERS:-127.0.0.1:9092}
REDIS=${NOFLY_REDIS_ADDR:-127.0.0.1:6379}
EXAMPLES=${SCHEMATHESIS_ALERTER_EXAMPLES:-50}
SEED=${SCHEMATHESIS_SEED:-15}
PARTITIONS=2
ZONES=$PWD/testdata/scenarios/zones.geojson
TRACK=$PWD/testdata/tracks/heathrow.ndjson

source "$SCRIPTS_DIR/schemathesis-lib.sh"
work=$(mktemp -d)
PIDFILE=$work/alerter.pid
run=$(od -An -N4 -tx4 /dev/urandom | tr -d ' ')
TOPIC=nofly-st-alerter-$run
EVENTS=nofly-st-alerter-events-$run
PREFIX=nofly-st-$run
PORT=$(free_port)
URL=http://127.0.0.1:$PORT

cleanup() {
  stop_pid "$PIDFILE" "$work/alerter" 30
  stop_pid "$work/fakeoidc.pid" "$work/fakeoidc" 10
  delete_topics "$TOPIC" "$EVENTS"
  # Every key of the run is under its prefix's hash tags.
  redis-cli -h "${REDIS%:*}" -p "${REDIS##*:}" --scan --pattern "{$PREFIX:*" 2>/dev/null |
    xargs -r -n 100 redis-cli -h "${REDIS%:*}" -p "${REDIS##*:}" del >/dev/null 2>&1 || log "could not delete keys {$PREFIX:*"
  rm -rf "$work"
}
trap cleanup EXIT

log "building cmd/alerter and cmd/ingest"
go build -o "$work/alerter" ./cmd/alerter
go build -o "$work/ingest" ./cmd/ingest
# An admin token: schemathesis reaches every route, and checks that a
# request without it gets 401.
TOKEN=$("$work/alerter" api-token --name st --role admin --append "$work/tokens")
# The file, not $URL/openapi.json: schemathesis leaves out the operation
# that serves the schema it loaded, and that one is described too (a Go
# test checks that the served document is this one).
"$work/alerter" openapi >"$work/openapi.json"
# The rate limits off: 2 workers go past 50 requests a second, and a run
# of 429s would test nothing else (the limits have Go tests).
"$work/alerter" serve --http "127.0.0.1:$PORT" --brokers "$BROKERS" --redis "$REDIS" --topic "$TOPIC" \
  --events-topic "$EVENTS" --partitions "$PARTITIONS" --group "nofly-st-$run" --redis-prefix "$PREFIX" \
  --zones "$ZONES" --api-tokens "$work/tokens" --api-rate-per-token 0 --api-rate-per-addr 0 \
  --map-pmtiles "$PWD/testdata/basemap/ilg.pmtiles" \
  --log-level warn >"$work/alerter.log" 2>&1 &
echo $! >"$PIDFILE"
wait_ready alerter "$(<"$PIDFILE")" 60 "$work/alerter.log" curl -fs -o /dev/null "$URL/readyz"

log "sending $TRACK to $TOPIC"
"$work/ingest" send --file "$TRACK" --brokers "$BROKERS" --topic "$TOPIC" --partitions "$PARTITIONS" \
  --progress none --log-level warn
# UAV-0042's track again as PILOT-0042 with its pilot 0.01° south (live,
# every other record; alt_m on some): the alarms, drones and events then
# answer a pilot (operator, operator_latest), which the description must
# describe too.
"$VENV/bin/python" - "$TRACK" >"$work/pilot.ndjson" <<'PY'
import json, sys
for i, line in enumerate(l for l in open(sys.argv[1]) if '"UAV-0042"' in l):
    r = json.loads(line)
    r["drone_id"] = "PILOT-0042"
    if i % 2 == 0:
        r["operator"] = {"lat": round(r["lat"] - 0.01, 6), "lon": r["lon"], "type": "live"}
        if i % 4 == 0:
            r["operator"]["alt_m"] = 31.5
    print(json.dumps(r))
PY
"$work/ingest" send --file "$work/pilot.ndjson" --brokers "$BROKERS" --topic "$TOPIC" --partitions "$PARTITIONS" \
  --progress none --log-level warn
# Until the alerter has raised and cleared: then GET /v1/alarms and
# /v1/events answer bodies, and the hooks get real alarm ids.
auth=(-H "Authorization: Bearer $TOKEN")
for ((i = 0; i < 300; i++)); do
  ids=$(curl -fsS "${auth[@]}" "$URL/v1/alarms?state=all" | "$VENV/bin/python" -c \
    'import json, sys; print(",".join(a["alarm_id"] for a in json.load(sys.stdin)["alarms"]))')
  cleared=$(curl -fsS "${auth[@]}" "$URL/v1/events" | grep -c '"type":"cleared"' || true)
  pilots=$(curl -fsS "${auth[@]}" "$URL/v1/alarms?state=all&drone=PILOT-0042" | grep -c '"operator":{' || true)
  [[ -n $ids && $cleared -gt 0 && $pilots -gt 0 ]] && break
  pid_alive "$PIDFILE" "$work/alerter" || { cat "$work/alerter.log" >&2; die "alerter exited"; }
  sleep 0.1
done
[[ -n $ids ]] || { tail -n 40 "$work/alerter.log" >&2; die "no alarm raised from $TRACK in 30s"; }
# What the hooks start from: cursors the API handed out, the zone set's
# version (its ETag) and the zone ids.
cursors=/v1/alarms=$(curl -fsS "${auth[@]}" "$URL/v1/alarms?state=all&limit=1" | "$VENV/bin/python" -c \
  'import json, sys; print(json.load(sys.stdin)["next_cursor"] or "")')
cursors+=,/v1/events=$(curl -fsS "${auth[@]}" "$URL/v1/events?limit=2" | tail -n 1 | "$VENV/bin/python" -c \
  'import json, sys; print(json.load(sys.stdin)["cursor"])')
# An ack, so GET /v1/audit answers entries (and a cursor) from the start.
curl -fsS -o /dev/null "${auth[@]}" -X POST "$URL/v1/alarms/${ids%%,*}/ack"
cursors+=,/v1/audit=$(curl -fsS "${auth[@]}" "$URL/v1/audit?limit=1" | "$VENV/bin/python" -c \
  'import json, sys; print(json.load(sys.stdin)["next_cursor"] or "")')
version=$(curl -fsS -D - -o /dev/null "${auth[@]}" "$URL/v1/zones" | tr -d '\r' | awk -F'"' 'tolower($1) ~ /^etag:/ {print $2}')
zone_ids=$("$VENV/bin/python" -c \
  'import json, sys; print(",".join(f["properties"]["id"] for f in json.load(open(sys.argv[1]))["features"]))' "$ZONES")
log "alerter ready on $URL (topic $TOPIC, prefix $PREFIX), zone version $version; schemathesis $("$VENV/bin/schemathesis" --version | awk '{print $NF}'), $EXAMPLES examples, seed $SEED"

rc=0
start=$SECONDS
# GET /v1/events/stream and GET /v1/map/positions are left out: a 200 is
# a stream that never ends, so every generated request would wait for its
# timeout. Their answers (status, content type, events, 400/410) are
# api/stream_test.go's, internal/alerterd/sse_proc_test.go's and
# api/mapview_test.go's.
# From $work, so nothing it writes lands in the tree.
(cd "$work" && SCHEMATHESIS_HOOKS=hooks PYTHONPATH=$SCRIPTS_DIR/schemathesis NOFLY_ST_ALARM_IDS=$ids \
  NOFLY_ST_ZONE_IDS=$zone_ids NOFLY_ST_ZONES=$ZONES NOFLY_ST_ZONE_VERSION=$version NOFLY_ST_CURSORS=$cursors \
  "$VENV/bin/schemathesis" run "$work/openapi.json" --url "$URL" -H "Authorization: Bearer $TOKEN" \
  --exclude-path /v1/events/stream --exclude-path /v1/map/positions \
  --checks all --max-examples "$EXAMPLES" --seed "$SEED" --workers 2 \
  --generation-database none --request-timeout 15 --no-color) || rc=$?
if ((rc != 0)); then
  log "schemathesis found disagreements between the API description and the alerter (exit $rc); alerter's log:"
  tail -n 40 "$work/alerter.log" >&2
  exit "$rc"
fi
log "schemathesis: no disagreement in $((SECONDS - start))s"

# The sign-in routes with single sign-on on: the same alerter again with
# --oidc-issuer at testenv's fake provider (the run above had it off, so
# they answered 404 oidc_off). No redirect is followed: /auth/login's 302
# goes to the provider, and the callback it would lead to is checked as its
# own operation (400 without this client's state).
log "again with single sign-on: /auth/* against a fake OpenID provider"
stop_pid "$PIDFILE" "$work/alerter" 30
go build -o "$work/fakeoidc" ./internal/testenv/fakeoidc
"$work/fakeoidc" >"$work/fakeoidc.out" 2>&1 &
echo $! >"$work/fakeoidc.pid"
for ((i = 0; i < 100; i++)); do
  ISSUER=$(head -n 1 "$work/fakeoidc.out" 2>/dev/null || true)
  [[ $ISSUER == http://* ]] && break
  sleep 0.1
done
[[ $ISSUER == http://* ]] || die "the fake OpenID provider did not start: $(cat "$work/fakeoidc.out")"
echo "schemathesis-client-secret" >"$work/oidc-secret"
"$work/alerter" serve --http "127.0.0.1:$PORT" --brokers "$BROKERS" --redis "$REDIS" --topic "$TOPIC" \
  --events-topic "$EVENTS" --partitions "$PARTITIONS" --group "nofly-st-$run" --redis-prefix "$PREFIX" \
  --zones "$ZONES" --api-tokens "$work/tokens" --api-rate-per-token 0 --api-rate-per-addr 0 \
  --oidc-issuer "$ISSUER" --oidc-client-id nofly --oidc-client-secret-file "$work/oidc-secret" \
  --oidc-roles nofly-admins=admin,nofly-operators=operator \
  --log-level warn >"$work/alerter.log" 2>&1 &
echo $! >"$PIDFILE"
wait_ready alerter "$(<"$PIDFILE")" 60 "$work/alerter.log" curl -fs -o /dev/null "$URL/readyz"
start=$SECONDS
(cd "$work" && SCHEMATHESIS_HOOKS=hooks PYTHONPATH=$SCRIPTS_DIR/schemathesis NOFLY_ST_ALARM_IDS=$ids \
  NOFLY_ST_ZONE_IDS=$zone_ids NOFLY_ST_ZONES=$ZONES NOFLY_ST_ZONE_VERSION=$version NOFLY_ST_CURSORS=$cursors \
  "$VENV/bin/schemathesis" run "$work/openapi.json" --url "$URL" -H "Authorization: Bearer $TOKEN" \
  --include-path-regex '^/auth/' --max-redirects 0 \
  --checks all --max-examples "$EXAMPLES" --seed "$SEED" --workers 2 \
  --generation-database none --request-timeout 15 --no-color) || rc=$?
if ((rc != 0)); then
  log "schemathesis found disagreements in the sign-in routes (exit $rc); alerter's log:"
  tail -n 40 "$work/alerter.log" >&2
  exit "$rc"
fi
log "schemathesis with single sign-on: no disagreement in $((SECONDS - start))s"
