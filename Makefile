# boxctl: build, test and bring up the test bed of real services.
GO       ?= go
PKG      := github.com/tangle-network/boxctl
VERSION  ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
COMMIT   ?= $(shell git rev-parse --verify -q HEAD 2>/dev/null || echo unknown)
LDFLAGS  := -s -w -X $(PKG)/internal/buildinfo.version=$(VERSION) -X $(PKG)/internal/buildinfo.commit=$(COMMIT)
# TESTFLAGS adds go test flags, e.g. TESTFLAGS=-v or TESTFLAGS='-run Bridge'.
TESTFLAGS ?=
BIN      := bin
# ARTIFACTS keeps what tests save with t.ArtifactDir() (the inspector's
# screenshot, say), under $(ARTIFACTS)/_artifacts/ (go test -v names each
# test's directory: "=== ARTIFACTS TestName DIR").
ARTIFACTS ?= $(CURDIR)/test-artifacts

.PHONY: all build release run test testbed testbed-down bench chaos soak lint clean

all: build

build:
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags '$(LDFLAGS)' -o $(BIN)/ ./cmd/...

# The released files in $(DIST): tar.gz archives of boxctl (Linux and macOS,
# amd64 and arm64; each with box-bridge-linux-amd64 and -arm64 beside it)
# and of box-bridge alone (Linux amd64 and arm64), SHA256SUMS and a
# CycloneDX SBOM (internal/release). The same commit and Go toolchain give
# the same bytes: file times are the commit's (SOURCE_DATE_EPOCH).
DIST ?= dist
SOURCE_DATE_EPOCH ?= $(shell git log -1 --format=%ct 2>/dev/null)
release:
	rm -rf $(DIST)
	SOURCE_DATE_EPOCH=$(SOURCE_DATE_EPOCH) $(GO) run ./internal/release/cmd/release \
		-out $(DIST) -version $(VERSION) -commit $(COMMIT) -ldflags '$(LDFLAGS)'

# The main job end to end: the test bed's Docker part (engine, registry,
# Node, base; no buildkitd: the engine's own BuildKit builds; not
# Kubernetes), box image for Docker, one live turn.
run:
	./scripts/run

# The test command: brings up the whole test bed (idempotent), then every test with
# the race detector. Integration tests use the real Docker engine, BuildKit,
# OCI registry and npm registry; test artifacts go to $(ARTIFACTS).
test: testbed
	mkdir -p $(ARTIFACTS)
	$(GO) test -race -timeout 80m -artifacts -outputdir $(ARTIFACTS) $(TESTFLAGS) ./...
	$(MAKE) fuzz

# Each fuzz target runs FUZZTIME (one target per go test: -fuzz takes one).
FUZZTIME ?= 10s
fuzz:
	$(GO) test -run '^$$' -fuzz '^FuzzDecodeChat$$' -fuzztime $(FUZZTIME) ./bridge/server
	$(GO) test -run '^$$' -fuzz '^FuzzParser$$' -fuzztime $(FUZZTIME) ./bridge/harness/claude

testbed:
	./scripts/testbed up

testbed-down:
	./scripts/testbed down

bench:
	./scripts/bench

# The chaos family and the leak cycles at full size (make test runs them
# small): CHAOS_FAULTS faults per chaos case on every target with the
# proxy's 16 s idle bound, CHAOS_LANES turns streaming at once in each
# case, LEAK_CYCLES create/destroy cycles per emulator, LEAK_KILLS callers
# killed mid-Create on Docker; WEBHOOK_EVENTS lifecycle events to a flaky
# webhook receiver, in real time over loopback HTTP.
CHAOS_FAULTS ?= 1000
CHAOS_LANES  ?= 8
LEAK_CYCLES  ?= 1000
LEAK_KILLS   ?= 200
WEBHOOK_EVENTS ?= 1000
chaos: testbed
	$(GO) test -race -timeout 12h -run '^TestChaos_Live$$' -v ./conformance -chaos-faults $(CHAOS_FAULTS) -chaos-lanes $(CHAOS_LANES) -chaos-idle 16s
	$(GO) test -race -timeout 12h -run '^TestLeaks_' -v ./provider/sandbox -leak-cycles $(LEAK_CYCLES) -leak-kills $(LEAK_KILLS)
	$(GO) test -timeout 30m -run '^TestSender_Chaos$$' -v ./provider/sandbox/webhook -webhook-events $(WEBHOOK_EVENTS) -webhook-real

# The many-cycle proofs of suspend and pools at full size (make test runs
# them small): SUSPEND_CYCLES suspend/resume cycles with a turn between
# each on every suspending vendor, POOL_CLAIMS personalized claims from a
# pool sized to them and as many claims of two processes from one pool.
SUSPEND_CYCLES ?= 100
POOL_CLAIMS    ?= 200
soak: testbed
	BOXCTL_SUSPEND_CYCLES=$(SUSPEND_CYCLES) $(GO) test -race -timeout 6h -v ./provider/sandbox \
		-run '^(TestProvider_LiveSuspendResume|TestPool_PersonalizedClaimsStayHits|TestPool_TwoProcessesClaim)$$' \
		-pool-claims $(POOL_CLAIMS) -pool-shared-claims $(POOL_CLAIMS)

# gofmt, go vet, and shellcheck on every shell script (scripts/lint installs
# the Debian package when it is missing).
lint:
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...
	./scripts/lint

clean:
	rm -rf $(BIN) $(DIST) $(ARTIFACTS)
