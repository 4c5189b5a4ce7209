# berth build and test entry points. `make test` is the one test command
# (CI runs it through .ci/run); `make run` starts berth locally.

GO      ?= go
BIN     ?= bin
PKGS    ?= ./...
# RELEASE is the version this tree is released as (internal/version, and
# server.json must name it); other builds report RELEASE+<commit>.
RELEASE := $(shell sed -n 's/^const Release = "\(.*\)"/\1/p' internal/version/version.go)
VERSION ?= $(RELEASE)+$(shell git rev-parse --short HEAD 2>/dev/null || echo dev)
LDFLAGS := -X github.com/berth-mcp/berth/internal/version.Version=$(VERSION)
RELEASE_LDFLAGS := -X github.com/berth-mcp/berth/internal/version.Version=$(RELEASE)

.PHONY: all build install cross release test vet postgres chromium kubeenv node run bench fuzz clean

# The platforms the berth CLI is built for. The server's local runtime
# and embedded PostgreSQL are Linux (and Unix) only; elsewhere berth is
# the client (login, whoami, mcp, token --remote) and says so.
PLATFORMS ?= linux/amd64 linux/arm64 darwin/amd64 darwin/arm64 windows/amd64 windows/arm64
DIST      ?= dist
PREFIX    ?= $(HOME)/.local

# The real Kubernetes control plane (etcd, kube-apiserver,
# kube-controller-manager, kube-scheduler) and kubelet that internal/kubetest starts,
# built by the separate module test/kubeenv into a cache folder outside the
# repository. Tests find it through BERTH_KUBE_BIN.
export BERTH_KUBE_BIN ?= $(shell test/kubeenv/build.sh dir)

all: build

# berth-agent is static (no cgo), so that it runs in sandboxes of any
# OCI image, whatever C library the image has or lacks.
build:
	@mkdir -p $(BIN)
	$(GO) build -ldflags '$(LDFLAGS)' -o $(BIN)/ ./cmd/berth ./cmd/berth-load
	CGO_ENABLED=0 $(GO) build -ldflags '$(LDFLAGS)' -o $(BIN)/ ./cmd/berth-agent

# install puts berth (and, on Linux, berth-agent and berth-load) in
# $(PREFIX)/bin.
install:
	@mkdir -p $(PREFIX)/bin
	GOBIN=$(abspath $(PREFIX)/bin) $(GO) install -ldflags '$(LDFLAGS)' ./cmd/berth
	@if [ "$$($(GO) env GOOS)" = linux ]; then GOBIN=$(abspath $(PREFIX)/bin) $(GO) install -ldflags '$(LDFLAGS)' ./cmd/berth-load && \
		GOBIN=$(abspath $(PREFIX)/bin) CGO_ENABLED=0 $(GO) install -ldflags '$(LDFLAGS)' ./cmd/berth-agent; fi
	@echo "installed in $(PREFIX)/bin"

# cross checks that the CLI builds for every platform in PLATFORMS.
cross:
	@for p in $(PLATFORMS); do \
		echo "build berth for $$p"; \
		GOOS=$${p%/*} GOARCH=$${p#*/} CGO_ENABLED=0 $(GO) build -ldflags '$(LDFLAGS)' -o /dev/null ./cmd/berth || exit 1; \
	done

# release writes versioned archives of berth for every platform (with
# berth-agent on Linux, where sandboxes run it) and their SHA-256 sums.
# The binaries report exactly RELEASE, the version server.json names.
release:
	@grep -q '"version": "$(RELEASE)"' server.json || { echo "server.json does not name version $(RELEASE)" >&2; exit 1; }
	@rm -rf $(DIST) && mkdir -p $(DIST)
	@set -e; for p in $(PLATFORMS); do \
		os=$${p%/*}; arch=$${p#*/}; name=berth_$(RELEASE)_$${os}_$${arch}; dir=$(DIST)/$$name; ext=; \
		[ $$os = windows ] && ext=.exe; \
		mkdir -p $$dir; \
		GOOS=$$os GOARCH=$$arch CGO_ENABLED=0 $(GO) build -trimpath -ldflags '$(RELEASE_LDFLAGS)' -o $$dir/berth$$ext ./cmd/berth; \
		if [ $$os = linux ]; then GOOS=$$os GOARCH=$$arch CGO_ENABLED=0 $(GO) build -trimpath -ldflags '$(RELEASE_LDFLAGS)' -o $$dir/berth-agent ./cmd/berth-agent; fi; \
		cp README.md $$dir/; \
		if [ $$os = windows ]; then (cd $(DIST) && zip -qr $$name.zip $$name); else tar -C $(DIST) -czf $(DIST)/$$name.tar.gz $$name; fi; \
		rm -rf $$dir; \
	done
	@cd $(DIST) && sha256sum berth_* > SHA256SUMS && cat SHA256SUMS

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

# kubeenv builds what is missing there, the real node's kubelet too; the
# first build takes several minutes (about 25 on 2 cores, kube-apiserver
# alone 10, kubelet 8), later ones nothing.
kubeenv:
	@test/kubeenv/build.sh >/dev/null

# The Kubernetes tests run their sandbox pods on a real node
# (internal/kubetest): containerd, runc and the CNI plugins from Debian's
# packages, with bash-static and busybox-static for a test image without
# a C library, and nftables for the rules that stand in for an enforcing
# network plugin in the egress test (kubetest's RestrictPods). node installs what is missing. Where it cannot (no apt, no
# root), the tests run those pods on the stand-in process kubelet instead
# and each says so in its output; BERTH_KUBE_NODE=real makes that a
# failure.
NODE_PACKAGES := containerd runc containernetworking-plugins iproute2 bash-static busybox-static nftables
node:
	@missing=; for p in $(NODE_PACKAGES); do dpkg-query -W -f '$${db:Status-Abbrev}' $$p 2>/dev/null | grep -q '^ii' || missing="$$missing $$p"; done; \
	if [ -z "$$missing" ]; then exit 0; fi; \
	echo "installing$$missing for the Kubernetes tests' real node"; \
	if [ "$$(id -u)" = 0 ]; then SUDO=; else SUDO=sudo; fi; \
	if ! command -v apt-get >/dev/null 2>&1 || ! { $$SUDO apt-get install -y $$missing >/dev/null || { $$SUDO apt-get update >/dev/null && $$SUDO apt-get install -y $$missing >/dev/null; }; }; then \
		echo "WARNING: could not install$$missing (apt-get install$$missing):" >&2; \
		echo "WARNING: the Kubernetes tests will run their pods on the stand-in kubelet, without a real container runtime, and say so." >&2; \
	fi

test: vet cross postgres chromium kubeenv node
	$(GO) test -race -count=1 -timeout 20m $(PKGS)

# run builds and starts berth with the embedded defaults (a private
# PostgreSQL under .berth/pg, sandboxes as local processes) on
# 127.0.0.1:$(PORT), e.g. make run PORT=9090; berth serve prints the URL
# to open and the first-token command.
PORT ?= 8080
run: build
	exec $(BIN)/berth serve --listen 127.0.0.1:$(PORT) --data-dir .berth

bench:
	$(GO) test -run '^$$' -bench . -benchmem -count 5 $(PKGS)

fuzz:
	$(GO) test -run '^$$' -fuzz FuzzApplyPatch -fuzztime 30s ./internal/agent/edit
	$(GO) test -run '^$$' -fuzz FuzzEditLines -fuzztime 30s ./internal/agent/edit
	$(GO) test -run '^$$' -fuzz FuzzJSONRPC -fuzztime 30s ./internal/mcpserver

clean:
	rm -rf $(BIN)
