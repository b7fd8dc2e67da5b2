# The README's two commands: `make demo` runs the pipeline, `make test` runs
# every test against real Kafka and Redis (installed and started by scripts/).
.PHONY: demo test fuzz services-start services-stop services-status bench bench-e2e bench-charts fmt

demo:
	go run ./cmd/demo

test:
	bash scripts/test.sh

# Every fuzz target (scripts/fuzz.sh); FUZZ picks targets by name, e.g.
# make fuzz FUZZ=FuzzHandler FUZZTIME=10m.
fuzz:
	bash scripts/fuzz.sh $(FUZZ)

bench:
	bash scripts/bench.sh

# BENCHMARKS.md's charts (benchmarks/*.svg) from the figures in
# benchmarks/*.json; go test (internal/benchcharts) fails when they differ.
bench-charts:
	go run ./cmd/benchcharts

# The end-to-end benchmark (cmd/bench) against the real services; flags in
# BENCH_E2E_FLAGS, e.g. make bench-e2e BENCH_E2E_FLAGS='--rate 0 --duration 30s'.
bench-e2e: services-start
	go run ./cmd/bench $(BENCH_E2E_FLAGS)

services-start:
	bash scripts/services.sh start

services-stop:
	bash scripts/services.sh stop

services-status:
	bash scripts/services.sh status

fmt:
	gofmt -w $$(git ls-files '*.go')
