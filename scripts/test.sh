#!/usr/bin/env bash
# The project's one test command (README: `make test`; CI: .ci/run).
# Installs and starts Redis and Kafka (and Debian's chromium for the
# dashboard's browser tests), then runs go vet, every test with the
# race detector against those real services, schemathesis against a live
# ingest and a live alerter (scripts/schemathesis.sh,
# scripts/schemathesis-alerter.sh), the clustered and secured proofs (build
# tag cluster), and every fuzz target (scripts/fuzz.sh; FUZZTIME, 20s by
# default, and FUZZTIME_STABLE for those in scripts/fuzz-stable.txt).
set -euo pipefail
cd "$(dirname "$0")/.."
FUZZTIME=${FUZZTIME:-20s}

# Each step's wall time, printed as a table when the script ends (passed or
# not): CI's budget is 15 minutes on two cores, and a step that grows shows.
step_names=() step_secs=() step_name="" step_start=$SECONDS
step() {
  if [[ -n $step_name ]]; then step_names+=("$step_name"); step_secs+=($((SECONDS - step_start))); fi
  step_name=$1 step_start=$SECONDS
  echo "== $1"
}
step_report() {
  local rc=${1:-$?} i
  if [[ -n $step_name ]]; then step_names+=("$step_name"); step_secs+=($((SECONDS - step_start))); fi
  echo "== step times (s)"
  for i in "${!step_names[@]}"; do printf '%6d  %s\n' "${step_secs[$i]}" "${step_names[$i]}"; done
  printf '%6d  total\n' "$SECONDS"
  return "$rc"
}
trap step_report EXIT

step "services: Redis and Kafka"
bash scripts/services.sh start
# The dashboard's browser tests (dashboard/browser_test.go) need chromium.
step "chromium"
bash scripts/chromium.sh install
# The Alertmanager proofs start private Alertmanagers (Debian's
# prometheus-alertmanager): installed once here, not by five tests at once
# racing for the package manager's lock.
step "alertmanager"
bash scripts/alertmanager.sh install
# promtool's rule tests (deploy/prometheus) and TestPrometheusLagRule
# need Debian's prometheus, unpacked into the cache.
step "prometheus"
bash scripts/prometheus.sh install
# Dex, the real OpenID provider of the sign-in test
# (dashboard/dex_browser_test.go), built from the Go module proxy into the
# cache once (about 2 min of CPU with cold caches; 0 s once cached): here,
# not by the test inside go test's time limit.
step "dex"
bash scripts/dex.sh install

step "gofmt"
unformatted=$(gofmt -l $(git ls-files '*.go' 2>/dev/null || find . -name '*.go'))
if [[ -n $unformatted ]]; then
  echo "gofmt would change:"; echo "$unformatted"; exit 1
fi
# Jobs that run beside the steps (bg_start), each in a process group of its
# own (setsid) so that a failing step stops them too, with its output kept
# for its bg_wait: go vet beside go test, and fuzzing from the embedded step
# on, both at the lowest CPU priority (their time is wall time: they fill
# the cores the steps leave idle; go test's proofs wait on outages and
# restarts more than they compute). The other steps run one after the
# other: beside the embedded step the cluster step made both three times
# as long (a private broker's controller took seconds per event), and
# schemathesis beside it made an API test miss its 1 s write timeout.
declare -A bg_pid bg_log bg_title
bg_start() {
  local name=$1; bg_title[$1]=$2; shift 2
  bg_log[$name]=$(mktemp)
  setsid bash -c 'start=$SECONDS; "$@"; rc=$?; echo "== $((SECONDS - start)) s"; exit $rc' _ "$@" >"${bg_log[$name]}" 2>&1 &
  bg_pid[$name]=$!
}
# bg_start NAME TITLE COMMAND...; bg_wait NAME SHOW: waits for NAME, adds
# its own time to the table, and prints its output (SHOW=all) or only its
# summary (SHOW=fuzz); on failure, all of it (fuzz: the failing target's
# part), and the script fails.
bg_wait() {
  local name=$1 show=$2 rc=0 log=${bg_log[$1]}
  wait "${bg_pid[$name]}" || rc=$?
  unset "bg_pid[$name]"
  step_names+=("${bg_title[$name]} (beside the steps above)")
  step_secs+=("$(sed -n 's/^== \([0-9]*\) s$/\1/p' "$log" | tail -n 1)")
  if ((rc != 0)) && [[ $show == fuzz ]]; then
    echo "fuzzing failed; the failing target's output:"
    awk '/^-- \.\/.* \(/ { buf = "" } { buf = buf $0 "\n" } END { printf "%s", buf }' "$log"
  elif [[ $show == fuzz ]]; then
    grep -E '^-- ' "$log"
  else
    cat "$log"
  fi
  rm -f "$log"
  return "$rc"
}
bg_stop() {
  local name
  for name in "${!bg_pid[@]}"; do kill -- -"${bg_pid[$name]}" 2>/dev/null || true; rm -f "${bg_log[$name]}"; done
}
# (rc passed on: under set -e a trap's "(exit $rc)" would end the trap.)
trap 'rc=$?; bg_stop; step_report "$rc"' EXIT

# SCHED_IDLE where chrt exists (util-linux): runs only on a core nothing
# else wants; nice 19 alone still took a share from the embedded step.
idle=(nice -n 19)
if command -v chrt >/dev/null && chrt --idle 0 true 2>/dev/null; then idle=(chrt --idle 0 nice -n 19); fi

# One vet for both builds: the cluster tag only adds files (none says
# !cluster, checked here), so this vets every file the plain build has.
if grep -rlE --include='*.go' '^//go:build .*!cluster' . | grep -q .; then
  echo "a file is built only without the cluster tag; vet both builds"; exit 1
fi
bg_start vet "go vet -tags cluster ./..." "${idle[@]}" go vet -tags cluster ./...
step "go test -race ./..."
# Three packages at a time on two cores: the long ones wait on outages,
# restarts and soaks more than they compute (two at a time left 40% of the
# CPU idle: 423 s, against 341 s), and they go first, as go test starts
# packages in the order given; one of them starting last was the tail.
# The dashboard's browser tests (chromium, and Dex's) go after the rest,
# alone: beside the alerter's crash and restart proofs they starved the
# shared broker of the two cores for seconds at a time (i/o timeouts to
# Kafka, proofs short of their records by their deadline).
first="./internal/alerterd ./alerts/outbox ./producer ./api ./internal/ingestd"
mod=$(go list -m)
# shellcheck disable=SC2046,SC2086
go test -race -p 3 -count=1 -timeout 25m $first \
  $(go list ./... | sed "s|^$mod|.|" | grep -vxF -f <(tr ' ' '\n' <<<"$first ./dashboard"))
# Its untimed browser tests run two at a time (dashboard/browser_test.go's
# untimed; the timed ones alone before them): 282 s against 312-348 s one
# at a time. Three at a time took as long, and made two of them fail on a
# redraw between a query and a click (both since read in one evaluation).
go test -race -count=1 -parallel 2 -timeout 25m ./dashboard
step "waiting for go vet"
bg_wait vet all
bg_start fuzz "fuzz targets (scripts/fuzz.sh)" env FUZZTIME="$FUZZTIME" "${idle[@]}" bash scripts/fuzz.sh

step "the embedded default (kfake + miniredis, internal/embedded): the producer's and the Redis-backed packages' tests on it"
# The demo runs on it, so it is held to the tests the real services pass:
# the producer's (idempotent dedup under fault injection, sequence errors,
# transactions, read_committed interop) and those of the alert API and the
# alarm, drone and zone stores. The store contract and the in-process
# reference proof run on it inside go test itself. Skipped here: the
# producer tests that start a broker of their own or name none (they ran
# above, and would run the same).
go build -o "${TMPDIR:-/tmp}/nofly-embedded" ./internal/embedded/serve
envfile=$(mktemp)
"${TMPDIR:-/tmp}/nofly-embedded" --env-file "$envfile" &
embedded_pid=$!
for _ in $(seq 50); do [[ -s $envfile ]] && break; sleep 0.1; done
[[ -s $envfile ]] || { echo "the embedded stack did not start"; exit 1; }
if ! env $(cat "$envfile") go test -race -count=1 -timeout 10m \
    -skip 'TestBrokerRestartKeepsAcknowledgedRecords|TestInteropReadersAndBrokerDump|TestTxnWriterClosesHangingTransaction|TestBrokerUnreachable|TestNewWithoutBroker' \
    ./producer/ ./api/ ./alerts/alarmstore ./alerts/dronestore ./geofence/zonestore; then
  kill "$embedded_pid"; exit 1
fi
kill "$embedded_pid"; wait "$embedded_pid" 2>/dev/null || true
rm -f "$envfile"
step "schemathesis: a live ingest against internal/ingestd/openapi.yaml"
bash scripts/schemathesis.sh
step "schemathesis: a live alerter against its merged API description"
bash scripts/schemathesis-alerter.sh
step "past one machine (build tag cluster): a 3-broker Kafka, a Redis Cluster, TLS/SASL/ACL"
# Each test starts the cluster or secured server it needs on free ports
# (scripts/kafka-cluster.sh, scripts/redis-cluster.sh, the secured modes of
# kafka.sh and redis.sh) and kills nodes of it.
cluster_pkgs=$(grep -rlE --include='*_test.go' '^//go:build cluster' . | xargs -n1 dirname | sort -u)
if [[ -z $cluster_pkgs ]]; then echo "no test file carries the cluster build tag"; exit 1; fi
# shellcheck disable=SC2086
go test -tags cluster -race -count=1 -timeout 25m -run '^(TestCluster|TestSecure)' $cluster_pkgs
step "waiting for the fuzz targets"
bg_wait fuzz fuzz
echo "== dashboard screenshots of the browser tests: ${NOFLY_ARTIFACTS:-$PWD/.artifacts}/dashboard"
echo "== all tests passed"
