# berth build and test entry points. `make test` is the one test command
# (CI runs it through .ci/run); `make run` starts berth locally.

GO      ?= go
BIN     ?= bin
PKGS    ?= ./...
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
LDFLAGS := -X github.com/berth-mcp/berth/internal/version.Version=$(VERSION)

.PHONY: all build test vet postgres chromium kubeenv run bench fuzz clean

# The real Kubernetes control plane (etcd, kube-apiserver,
# kube-controller-manager, kube-scheduler) that internal/kubetest starts,
# built by the separate module test/kubeenv into a cache folder outside the
# repository. Tests find it through BERTH_KUBE_BIN.
export BERTH_KUBE_BIN ?= $(shell test/kubeenv/build.sh dir)

all: build

build:
	@mkdir -p $(BIN)
	$(GO) build -ldflags '$(LDFLAGS)' -o $(BIN)/ ./cmd/berth ./cmd/berth-agent ./cmd/berth-load

vet:
	$(GO) vet $(PKGS)
	@unformatted=$$(gofmt -l cmd internal migrations web 2>/dev/null); \
	if [ -n "$$unformatted" ]; then echo "gofmt needed:"; echo "$$unformatted"; exit 1; fi

# Tests talk to a real PostgreSQL on 127.0.0.1:5432. Start the machine's
# cluster when it is down; say what is missing when it cannot be started.
postgres:
	@if pg_isready -q -h 127.0.0.1 -p 5432 2>/dev/null; then exit 0; fi; \
	if command -v pg_ctlcluster >/dev/null 2>&1 && [ -d /etc/postgresql ]; then \
		echo "starting PostgreSQL on 127.0.0.1:5432"; \
		pg_ctlcluster --skip-systemctl-redirect $$(ls /etc/postgresql | head -n1) main start || true; \
	fi; \
	for i in $$(seq 1 60); do pg_isready -q -h 127.0.0.1 -p 5432 2>/dev/null && exit 0; sleep 0.5; done; \
	echo "PostgreSQL is not reachable on 127.0.0.1:5432 and could not be started." >&2; \
	echo "Install it (apt-get install postgresql) with trust auth for local TCP connections, or start it." >&2; \
	exit 1

# The browser tests (internal/browsertest) drive a real headless Chromium:
# install the Debian package when it is missing.
chromium:
	@if command -v chromium >/dev/null 2>&1; then exit 0; fi; \
	echo "installing Chromium for the browser tests"; \
	if [ "$$(id -u)" = 0 ]; then SUDO=; else SUDO=sudo; fi; \
	$$SUDO apt-get install -y chromium >/dev/null || { $$SUDO apt-get update >/dev/null && $$SUDO apt-get install -y chromium >/dev/null; } || { \
		echo "Chromium could not be installed; install it (apt-get install chromium) for the browser tests." >&2; exit 1; }

# kubeenv builds what is missing there; the first build takes several
# minutes (about 16 on 2 cores, kube-apiserver alone 10), later ones nothing.
kubeenv:
	@test/kubeenv/build.sh >/dev/null

test: vet postgres chromium kubeenv
	$(GO) test -race -count=1 -timeout 20m $(PKGS)

# run builds and starts berth with the embedded defaults: a private
# PostgreSQL under .berth/pg and sandboxes as local processes.
run: build
	@echo "berth on http://127.0.0.1:8080 (data in .berth)"
	@echo 'get a token in another terminal:  TOKEN=$$(bin/berth token create --user admin)'
	exec $(BIN)/berth serve --listen 127.0.0.1:8080 --data-dir .berth

bench:
	$(GO) test -run '^$$' -bench . -benchmem -count 5 $(PKGS)

fuzz:
	$(GO) test -run '^$$' -fuzz FuzzApplyPatch -fuzztime 30s ./internal/agent/edit
	$(GO) test -run '^$$' -fuzz FuzzEditLines -fuzztime 30s ./internal/agent/edit
	$(GO) test -run '^$$' -fuzz FuzzJSONRPC -fuzztime 30s ./internal/mcpserver

clean:
	rm -rf $(BIN)
