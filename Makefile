# ecstore — see README.md.
GO      ?= go
BIN     ?= bin/ecstore
GOBIN   := $(shell $(GO) env GOPATH)/bin
DATA    ?= ./ecstore-data
VERSION ?= $(shell git describe --always --dirty 2>/dev/null || echo devel)
# FAULT_SEED seeds the fault suite in `make test`: by default it is taken
# from the commit, so a CI run is replayed exactly by running CI again on
# the same commit, and each commit still explores a new schedule. 0 seeds
# from the clock.
FAULT_SEED ?= $(shell printf '%d' 0x$$(git rev-parse --short=15 HEAD 2>/dev/null || echo 0) 2>/dev/null || echo 0)

.PHONY: build run demo test test-fault test-fast test-slow lint deps bench bench-suite clean

build:
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags "-X main.version=$(VERSION)" -o $(BIN) ./cmd/ecstore

# run: the gateway on the embedded default cluster (local directories in $(DATA)).
run: build
	$(BIN) serve --data $(DATA) --log-level info

# demo: store and read back a file through the CLI.
demo: build
	bash scripts/demo.sh $(BIN) $(DATA)

deps:
	bash scripts/install-deps.sh

# test: everything CI runs — lint, unit tests with -race, the interop suites
# against real XRootD tools (build tag "interop"), the slow cross-process
# suites (build tag "slow") and the fault-injection suite (build tag
# "fault", bounded schedules; run alone so its timing checks own the CPU).
test: deps lint
	CI=$${CI:-true} $(GO) test -race -count=1 -timeout 20m -tags interop ./...
	CI=$${CI:-true} $(GO) test -count=1 -timeout 40m -tags slow ./test/...
	CI=$${CI:-true} $(GO) test -count=1 -timeout 20m -tags fault ./test/fault/ -seed=$(FAULT_SEED)

# test-fault: the seeded fault-injection suite alone, verbose; pass
# FAULT_ARGS, e.g. FAULT_ARGS="-seed=N" to replay a schedule or
# FAULT_ARGS="-duration=20m -steps=100000" for a long run.
test-fault: build
	CI=$${CI:-true} $(GO) test -count=1 -timeout 90m -tags fault -v ./test/fault/ -args $(FAULT_ARGS)

# test-fast: the unit tests only (what `go test ./...` runs).
test-fast:
	$(GO) test -count=1 ./...

lint:
	@fmt=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$fmt" ]; then echo "gofmt needed:"; echo "$$fmt"; exit 1; fi
	$(GO) vet -tags interop,slow,fault ./...
	$(GOBIN)/staticcheck -tags interop,slow,fault ./...

bench:
	$(GO) test -run '^$$' -bench . -benchmem ./internal/...

# bench-suite: the benchmark suite of issue 5 (bench/run.sh): machine limits,
# a plain xrootd baseline and ecstore on nodes and local directories, one
# table in bench/RESULTS.md. ARGS=--quick for a two-minute smoke run;
# BENCH_DIR selects the disk it works on (default /var/tmp).
bench-suite: build
	bash bench/run.sh $(ARGS)

clean:
	rm -rf bin
