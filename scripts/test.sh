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
  local rc=$? i
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

step "gofmt"
unformatted=$(gofmt -l $(git ls-files '*.go' 2>/dev/null || find . -name '*.go'))
if [[ -n $unformatted ]]; then
  echo "gofmt would change:"; echo "$unformatted"; exit 1
fi
step "go vet -tags cluster ./..."
# One vet for both builds: the cluster tag only adds files (none says
# !cluster, checked here), so this vets every file the plain build has.
if grep -rlE --include='*.go' '^//go:build .*!cluster' . | grep -q .; then
  echo "a file is built only without the cluster tag; vet both builds"; exit 1
fi
go vet -tags cluster ./...
step "go test -race ./..."
# Three packages at a time on two cores: the long ones wait on outages,
# restarts and soaks more than they compute (two at a time left 40% of the
# CPU idle: 423 s, against 341 s), and they go first, as go test starts
# packages in the order given; one of them starting last was the tail.
first="./internal/alerterd ./alerts/outbox ./dashboard ./producer ./api ./internal/ingestd"
mod=$(go list -m)
# shellcheck disable=SC2046,SC2086
go test -race -p 3 -count=1 -timeout 25m $first \
  $(go list ./... | sed "s|^$mod|.|" | grep -vxF -f <(tr ' ' '\n' <<<"$first"))
fuzzlog=$(mktemp)
fuzz_pid=""
# setsid: the fuzzer and its workers form a group of their own, so that a
# step failing below stops them too instead of leaving them running.
FUZZTIME=$FUZZTIME setsid nice -n 19 bash scripts/fuzz.sh >"$fuzzlog" 2>&1 &
fuzz_pid=$!
trap 'rc=$?; [[ -n $fuzz_pid ]] && kill -- -"$fuzz_pid" 2>/dev/null; rm -f "$fuzzlog"; (exit $rc); step_report' EXIT
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
    -skip 'TestBrokerRestartKeepsAcknowledgedRecords|TestBrokerUnreachable|TestNewWithoutBroker' \
    ./producer/ ./api/ ./alerts/alarmstore ./alerts/dronestore ./geofence/zonestore; then
  kill "$embedded_pid"; exit 1
fi
kill "$embedded_pid"; wait "$embedded_pid" 2>/dev/null || true
rm -f "$envfile"
step "past one machine (build tag cluster): a 3-broker Kafka, a Redis Cluster, TLS/SASL/ACL"
# Each test starts the cluster or secured server it needs (scripts/
# kafka-cluster.sh, scripts/redis-cluster.sh, the secured modes of kafka.sh
# and redis.sh) and kills nodes of it; a step of its own so three more JVMs
# never share the machine with the main run.
cluster_pkgs=$(grep -rlE --include='*_test.go' '^//go:build cluster' . | xargs -n1 dirname | sort -u)
if [[ -z $cluster_pkgs ]]; then echo "no test file carries the cluster build tag"; exit 1; fi
go test -tags cluster -race -count=1 -timeout 25m -run '^(TestCluster|TestSecure)' $cluster_pkgs
step "schemathesis: a live ingest against internal/ingestd/openapi.yaml"
bash scripts/schemathesis.sh
step "schemathesis: a live alerter against its merged API description"
bash scripts/schemathesis-alerter.sh

step "fuzz targets (scripts/fuzz.sh), beside the steps above"
# It started before the embedded step, at the lowest CPU priority: the
# steps since wait on brokers and timeouts more than they compute, and the fuzz
# targets' time is wall time, so they fill the idle cores instead of adding
# five minutes.
if ! wait "$fuzz_pid"; then
  fuzz_pid=""
  echo "fuzzing failed; the failing target's output:"
  awk '/^-- \.\/.* \(/ { buf = "" } { buf = buf $0 "\n" } END { printf "%s", buf }' "$fuzzlog"
  exit 1
fi
fuzz_pid=""
grep -E '^-- ' "$fuzzlog"
echo "== dashboard screenshots of the browser tests: ${NOFLY_ARTIFACTS:-$PWD/.artifacts}/dashboard"
echo "== all tests passed"
