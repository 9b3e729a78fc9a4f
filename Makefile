# ecstore — see README.md.
GO      ?= go
BIN     ?= bin/ecstore
GOBIN   := $(shell $(GO) env GOPATH)/bin
DATA    ?= ./ecstore-data
VERSION ?= $(shell git describe --always --dirty 2>/dev/null || echo devel)

.PHONY: build run demo test test-fault test-fast test-slow lint deps bench clean

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
# against real XRootD tools (build tag "interop"), and the slow cross-process
# suites (build tag "slow").
test: deps lint
	CI=$${CI:-true} $(GO) test -race -count=1 -timeout 20m -tags interop ./...
	CI=$${CI:-true} $(GO) test -count=1 -timeout 40m -tags slow ./test/...

# test-fault: the seeded cross-process fault-injection suite (test/fault).
# Not yet part of `test`: it still fails on purpose on two known engine bugs
# (see the issue 4 notes); run with -args -seed=N to replay a schedule.
test-fault: build
	CI=$${CI:-true} $(GO) test -count=1 -timeout 20m -tags fault -v ./test/fault/

# test-fast: the unit tests only (what `go test ./...` runs).
test-fast:
	$(GO) test -count=1 ./...

lint:
	@fmt=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$fmt" ]; then echo "gofmt needed:"; echo "$$fmt"; exit 1; fi
	$(GO) vet -tags interop,slow,fault ./...
	$(GOBIN)/staticcheck -tags interop,slow,fault ./...

bench:
	$(GO) test -run '^$$' -bench . -benchmem ./internal/...

clean:
	rm -rf bin
