# The README's two commands: `make demo` runs the pipeline, `make test` runs
# every test against real Kafka and Redis (installed and started by scripts/).
.PHONY: demo test services-start services-stop services-status bench fmt

demo:
	go run ./cmd/demo

test:
	bash scripts/test.sh

bench:
	bash scripts/bench.sh

services-start:
	bash scripts/services.sh start

services-stop:
	bash scripts/services.sh stop

services-status:
	bash scripts/services.sh status

fmt:
	gofmt -w $$(git ls-files '*.go')
