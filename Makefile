# Development targets for deployment_service_exporter. CI (.ci/run) runs the
# same checks; `make bench` runs the performance suite of BENCHMARKS.md.

GO ?= go

.PHONY: all build test style vet lint tidy bench bench-smoke licenses release-tools release-check

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

## licenses: every dependency's license is compatible with Apache-2.0, NOTICE is complete
licenses:
	./scripts/licenses.sh check

## release-tools: GoReleaser, syft and actionlint in $(go env GOPATH)/bin, at the versions .ci/run pins
release-tools:
	@for m in $$(sed -n 's/^build_tool \(goreleaser\|syft\|actionlint\) \([^ ]*\).*/\2/p' .ci/run); do \
		echo "go install $$m"; GOFLAGS=-mod=mod $(GO) install $$m || exit 1; \
	done

## release-check: goreleaser check and a checked snapshot release for linux/amd64 (INSTALL_CHECK=1: install the .deb too, as root)
release-check:
	./scripts/release-check.sh
