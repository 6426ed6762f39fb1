# Development targets for deployment_service_exporter. CI (.ci/run) runs the
# same checks; `make bench` runs the performance suite of BENCHMARKS.md.

GO ?= go

.PHONY: all build test style vet lint tidy bench bench-smoke

all: style vet lint test build

## build: the release binary ./dist/deployment_service_exporter (scripts/build.sh)
build:
	./scripts/build.sh

## test: every test, with the race detector
test:
	$(GO) test -race ./...

## style: fail on files gofmt would change
style:
	@unformatted=$$(gofmt -l $$(git ls-files '*.go')); \
	if [ -n "$$unformatted" ]; then echo "not gofmt'ed:"; echo "$$unformatted"; exit 1; fi

## vet: go vet over the module
vet:
	$(GO) vet ./...

## lint: staticcheck with every check enabled (pinned, fetched by go run)
STATICCHECK ?= honnef.co/go/tools/cmd/staticcheck@v0.8.2
lint:
	$(GO) run $(STATICCHECK) -checks all ./...

## tidy: go.mod and go.sum are tidy
tidy:
	$(GO) mod tidy
	git diff --exit-code go.mod go.sum

## bench: the whole performance suite, one table (see BENCHMARKS.md)
bench:
	$(GO) run ./bench

## bench-smoke: every Go benchmark once, as CI runs them
bench-smoke:
	$(GO) test ./... -run '^$$' -bench . -benchtime 1x -benchmem
