package depcheck

import (
	"bytes"
	"encoding/json"
	"io"
	"os/exec"
	"slices"
	"strings"
	"testing"
)

const mod = "github.com/tangle-network/boxctl"

type pkg struct {
	ImportPath   string
	Dir          string
	Imports      []string
	Deps         []string
	TestGoFiles  []string
	XTestGoFiles []string
	TestImports  []string
	XTestImports []string
}

func listPackages(t *testing.T) []pkg {
	t.Helper()
	cmd := exec.Command("go", "list", "-json", "./...")
	cmd.Dir = "../.."
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, stderr.String())
	}
	var pkgs []pkg
	dec := json.NewDecoder(bytes.NewReader(out))
	for {
		var p pkg
		if err := dec.Decode(&p); err == io.EOF {
			break
		} else if err != nil {
			t.Fatalf("decode go list output: %v", err)
		}
		pkgs = append(pkgs, p)
	}
	if len(pkgs) == 0 {
		t.Fatal("go list found no packages")
	}
	return pkgs
}

func rel(path string) string { return strings.TrimPrefix(strings.TrimPrefix(path, mod), "/") }

func under(path, prefix string) bool {
	return path == prefix || strings.HasPrefix(path, prefix+"/")
}

// kind is what a test-only package is.
type kind string

const (
	// fake is a test double of someone else's server or program.
	fake kind = "fake"
	// helper is a package other packages' tests use.
	helper kind = "test helper"
)

// testOnlyPkg is a package that exists only for tests. It follows the
// rules of its place in the tree (allowed) and may import, besides, what
// extra lists (packages and their subpackages), test-only ones included.
// A leaf imports nothing of ours, so the tests of every package may import
// it, those of the packages that import nothing of ours too.
type testOnlyPkg struct {
	kind  kind
	extra []string
	leaf  bool
}

// testOnly lists every package that exists only for tests. Product code
// imports none of them. A package named like one (a path segment starting
// or ending with "fake", or ending with "test") must be listed here, and
// every listed package must exist.
var testOnly = map[string]testOnlyPkg{
	"boximage/ecrfake":           {kind: fake},
	"bridge/internal/fakeclaude": {kind: fake},

	"internal/testbed":           {kind: helper},
	"internal/testbed/baseimage": {kind: helper},
	// The test bed's own tool: the state file it writes (internal/testbed)
	// and the base image it pushes (internal/testbed/baseimage).
	"internal/testbed/cmd/testbedctl": {kind: helper, extra: []string{"internal/testbed"}},
	// npm installs use the test bed's Node and cache.
	"internal/npmtest": {kind: helper, extra: []string{"internal/testbed"}},
	// Vendors' official JavaScript SDKs, pinned with their locks, installed
	// with the test bed's Node and cache, running scenario scripts.
	"internal/jssdk":         {kind: helper, extra: []string{"pins", "internal/testbed"}},
	"internal/boxbridgetest": {kind: helper},
	// Builds the real box image (boximage, pins) on the test bed, with a
	// box-bridge from boxbridgetest.
	"internal/boxtest": {kind: helper, extra: []string{"boximage", "pins", "internal/boxbridgetest", "internal/testbed"}},
	// The bridge's test programs are built by boxbridgetest.
	"bridge/internal/bridgetest":  {kind: helper, extra: []string{"internal/boxbridgetest"}},
	"bridge/internal/schemacheck": {kind: helper},
	// A broken box-bridge for the conformance suite's tests: the real
	// bridge behind a proxy that drops replayed events.
	"conformance/internal/lossybridge": {kind: fake, extra: []string{"bridge"}},
	// A harness test installs the real CLI from npm with the test bed's
	// Node and points it at the local model endpoint (internal/routerstub);
	// it waits with polltest.
	"bridge/harness/harnesstest": {kind: helper, extra: []string{"internal/npmtest", "internal/testbed", "internal/polltest"}},
	// The E2B emulator on the test bed, with the real box image as a
	// template.
	"internal/e2btest": {kind: helper, extra: []string{"vendors", "internal/boxtest", "internal/testbed"}},
	// The Kubernetes vendor on the test bed's cluster, with the real box
	// image in the test bed's registry.
	"internal/kubetest": {kind: helper, extra: []string{"vendors", "internal/boxtest", "internal/testbed"}},
	// The live fixture of the sandbox provider and what is built on it:
	// the Docker vendor and the emulators and cluster beside it, the box
	// image, a local model endpoint.
	"internal/sandboxtest": {kind: helper, extra: []string{"provider", "vendors", "internal/boxtest",
		"internal/e2btest", "internal/kubetest", "internal/testbed"}},
	// Shared test plumbing, for every package's tests.
	"internal/goldentest": {kind: helper, leaf: true},
	"internal/polltest":   {kind: helper, leaf: true},
	"pins/pinstest":       {kind: helper},
	// The suite waits with polltest.
	"vendors/vendortest": {kind: helper, extra: []string{"internal/polltest"}},
	// A resolver and counting listeners of egress tests.
	"vendors/egress/egresstest": {kind: helper},
}

// pending are listed test-only packages the architecture names that are
// not written yet (none today). A pending package that exists fails the
// test, so an entry leaves here as soon as its package lands.
var pending = map[string]bool{}

// emulators are product code (`boxctl emulate`, like internal/routerstub
// for the model Router) that serve a vendor's APIs locally with real boxes
// on the Docker engine behind them: besides their vendor's subtree, each
// may import the Docker vendor that runs those boxes and the image
// builder (boximage) that builds their images. No client imports an
// emulator.
var emulators = map[string]bool{
	"vendors/e2b/e2bemu":         true,
	"vendors/daytona/daytonaemu": true,
}

// emulatorKit is what the emulators share (their faults, the registry of
// their Docker boxes, their listener) and holds no vendor's API: under
// vendors, beside the vendors it emulates, so that every emulator may
// import it; it imports the Docker vendor, as they do, and no client
// imports it.
const emulatorKit = "vendors/emukit"

// shared are the packages under vendors that hold no vendor code and that
// every part may import as it imports the vendors interface package: the
// box labels and lifetime names (vendors/boxmeta), the process layer
// (vendors/boxproc), the owners and the reaper (vendors/reaper), the
// egress policy (vendors/egress) and its enforcement on a Linux bridge
// (firewall, relay, gate), which the Docker vendor, its emulators and an
// in-process gate of the sandbox provider share.
var shared = map[string]bool{
	"vendors/boxmeta":         true,
	"vendors/boxproc":         true,
	"vendors/reaper":          true,
	"vendors/egress":          true,
	"vendors/egress/firewall": true,
	"vendors/egress/relay":    true,
	"vendors/egress/gate":     true,
}

// foundations are the shared packages the vendors interface package is
// written over: it imports them (and exposes their types, so they are
// public for a vendor outside this module), and they import nothing of
// ours.
var foundations = map[string]bool{
	"vendors/boxmeta": true,
	"vendors/boxproc": true,
	"vendors/egress":  true,
}

// opener is the package that opens any vendor from flags and the
// environment: it imports every vendor (never an emulator), and no vendor
// imports it.
const opener = "vendors/open"

// vendorsAPI reports whether to is the vendors interface package or a
// shared package beside it.
func vendorsAPI(to string) bool { return to == "vendors" || shared[to] }

// looksTestOnly reports a path named like a fake or a test helper.
func looksTestOnly(p string) bool {
	for _, seg := range strings.Split(p, "/") {
		if strings.HasPrefix(seg, "fake") || strings.HasSuffix(seg, "fake") || strings.HasSuffix(seg, "test") {
			return true
		}
	}
	return false
}

// allowed reports whether a package at from may import our package to by
// the architecture's direction: cmd -> everything; provider/sandbox ->
// provider, vendors, pins; conformance -> provider/sandbox, vendors/...,
// boximage, pins; boximage -> pins, vendors and the box labels; the
// bridge none of the client side; bridge/wire nothing of ours, and
// vendors nothing but internal plumbing and its foundations, which import
// nothing of ours.
// It holds for test-only packages by their place in the tree too;
// permitted adds what separates them from product code.
func allowed(from, to string) bool {
	switch {
	case under(from, "cmd"):
		return true
	case under(from, "bridge/wire"):
		// The wire types both sides share import nothing of ours.
		return false
	case foundations[from]:
		// Nor does what the vendors interface package is written over.
		return false
	case under(to, "internal"):
		// Shared plumbing, for every part.
		return true
	case under(from, "internal"):
		return false
	case under(from, "bridge"):
		return under(to, "bridge")
	case under(from, "provider/sandbox"):
		// The Vendor interface, never a vendor's implementation.
		return under(to, "provider") || vendorsAPI(to) || under(to, "pins") || under(to, "bridge/wire")
	case under(from, "provider"):
		return under(to, "provider") && !under(to, "provider/sandbox") || under(to, "bridge/wire")
	case from == "vendors":
		// The interface package holds no vendor's code: beside internal
		// plumbing it imports only its foundations.
		return foundations[to]
	case from == opener:
		return under(to, "vendors") && !emulators[to] && to != opener && to != emulatorKit
	case emulators[from] && to == emulatorKit:
		return true
	case from == emulatorKit && under(to, "vendors/docker"):
		// The kit's registry makes the emulators' Docker vendor boxes.
		return true
	case emulators[from] && (under(to, "vendors/docker") || under(to, "boximage")):
		// An emulator's boxes are Docker vendor boxes, and the images it
		// builds for them (as a vendor's runner builds a sandbox's image
		// from a Dockerfile) come from our image builder.
		return true
	case under(from, "vendors"):
		// vendors/X -> the interface package and X's own subtree, but not
		// its emulator; no vendor imports another.
		own := strings.Join(strings.Split(from, "/")[:2], "/")
		return vendorsAPI(to) || under(to, own) && (!emulators[to] || under(from, to))
	case under(from, "boximage"):
		// Publishing hands the pushed image to a vendor's ImageImporter;
		// the image's init reads the lifetime the vendors set (boxmeta).
		return under(to, "boximage") || under(to, "pins") || to == "vendors" || to == "vendors/boxmeta"
	case under(from, "pins"):
		return under(to, "pins")
	case under(from, "conformance"):
		return under(to, "conformance") || under(to, "provider") || under(to, "vendors") ||
			under(to, "boximage") || under(to, "pins") || under(to, "bridge/wire")
	}
	return false
}

// permitted reports whether our package from may import our package to,
// and why not when it may not.
func permitted(from, to string) (bool, string) {
	src, fromTestOnly := testOnly[from]
	dst, toTestOnly := testOnly[to]
	if fromTestOnly && slices.ContainsFunc(src.extra, func(e string) bool { return under(to, e) }) {
		return true, ""
	}
	switch {
	case fromTestOnly && src.leaf:
		return false, "a leaf " + string(src.kind) + " imports nothing of ours"
	case toTestOnly && !fromTestOnly:
		return false, "product code never imports a " + string(dst.kind)
	case toTestOnly:
		return false, "a " + string(src.kind) + " imports a " + string(dst.kind) + " only by an explicit allowance in testOnly"
	case !allowed(from, to):
		return false, "against the architecture's import direction"
	}
	return true, ""
}

func TestImportDirection(t *testing.T) {
	for _, p := range listPackages(t) {
		from := rel(p.ImportPath)
		for _, imp := range p.Imports {
			if !strings.HasPrefix(imp, mod+"/") {
				continue
			}
			if ok, why := permitted(from, rel(imp)); !ok {
				t.Errorf("%s imports %s: %s", from, rel(imp), why)
			}
		}
	}
}

// TestTestOnlyListed keeps testOnly exact: every package named like a
// fake or a test helper is listed, and every listed package exists.
func TestTestOnlyListed(t *testing.T) {
	exists := map[string]bool{}
	for _, p := range listPackages(t) {
		path := rel(p.ImportPath)
		exists[path] = true
		if _, ok := testOnly[path]; looksTestOnly(path) && !ok {
			t.Errorf("%s is named like a fake or a test helper but is not in testOnly: list it as one, or rename it", path)
		}
	}
	for _, path := range slices.Sorted(func(yield func(string) bool) {
		for p := range testOnly {
			if !yield(p) {
				return
			}
		}
	}) {
		switch {
		case pending[path] && exists[path]:
			t.Errorf("%s exists now: remove it from pending", path)
		case !pending[path] && !exists[path]:
			t.Errorf("testOnly lists %s, which no longer exists: remove it", path)
		}
	}
	for path := range pending {
		if _, ok := testOnly[path]; !ok {
			t.Errorf("pending names %s, which testOnly does not list", path)
		}
	}
}

func TestBridgeBinaryStaysSmall(t *testing.T) {
	forbidden := []string{
		"github.com/docker/docker",
		"github.com/moby/buildkit",
		"github.com/spf13/cobra",
		"github.com/google/go-containerregistry",
		"github.com/aws/aws-sdk-go-v2",
		// GET /metrics writes the text format itself; the Prometheus
		// modules are for the tests that parse it.
		"github.com/prometheus",
		// Spans go out over OTLP/HTTP through internal/tracing's own
		// exporter; the SDK's exporters bring gRPC and its gateway (with
		// the protobuf runtime, 9 MB of binary and 5 MB of memory at
		// start).
		"google.golang.org/grpc",
		"github.com/grpc-ecosystem",
	}
	found := false
	for _, p := range listPackages(t) {
		if rel(p.ImportPath) != "cmd/box-bridge" {
			continue
		}
		found = true
		for _, d := range p.Deps {
			for _, f := range forbidden {
				if under(d, f) {
					t.Errorf("cmd/box-bridge links %s (via %s)", f, d)
				}
			}
		}
	}
	if !found {
		t.Error("go list found no cmd/box-bridge")
	}
}

func TestAllowed(t *testing.T) {
	tests := []struct {
		from, to string
		want     bool
	}{
		{"cmd/boxctl", "vendors/docker", true},
		{"cmd/boxctl", "provider/sandbox", true},
		{"bridge/server", "bridge/wire", true},
		{"bridge/server", "provider", false},
		{"bridge/engine", "internal/buildinfo", true},
		{"bridge/wire", "bridge/store", false},
		{"bridge/wire", "internal/buildinfo", false},
		{"provider", "bridge/wire", true},
		{"provider", "bridge/server", false},
		{"provider", "provider/sandbox", false},
		{"provider/sandbox", "provider", true},
		{"provider/sandbox", "vendors", true},
		{"provider/sandbox", "vendors/docker", false},
		{"provider/sandbox", "pins", true},
		{"provider/sandbox", "bridge/wire", true},
		{"provider/sandbox", "bridge/server", false},
		{"provider/sandbox", "boximage", false},
		{"provider/sandbox/internal/wait", "provider/sandbox", true},
		{"vendors", "vendors/boxmeta", true},
		{"vendors/boxmeta", "internal/buildinfo", false},
		{"boximage", "vendors/boxmeta", true},
		{"boximage", "vendors/boxproc", false},
		{"bridge/harness/opencode", "vendors/boxmeta", false},
		{"bridge/harness/opencode", "internal/imageenv", true},
		{"vendors", "bridge/wire", false},
		{"vendors", "pins", false},
		{"vendors", "vendors/docker", false},
		{"vendors/docker", "vendors", true},
		{"vendors/docker", "internal/dockerclient", true},
		{"vendors/docker", "vendors/e2b", false},
		{"vendors/docker", "pins", false},
		{"vendors/e2b", "vendors/e2b/api", true},
		{"vendors/e2b/e2bemu", "vendors/docker", true},
		{"vendors/daytona/daytonaemu", "boximage", true},
		{"vendors/daytona", "boximage", false},
		{"vendors/e2b/e2bemu", "vendors", true},
		{"vendors/e2b/e2bemu", "internal/dockerclient", true},
		{"vendors/e2b/e2bemu", "vendors/daytona", false},
		{"vendors/e2b/e2bemu", "vendors/emukit", true},
		{"vendors/daytona/daytonaemu", "vendors/emukit", true},
		{"vendors/emukit", "vendors/docker", true},
		{"vendors/emukit", "vendors", true},
		{"vendors/emukit", "boximage", false},
		{"vendors/emukit", "vendors/e2b", false},
		{"vendors/e2b", "vendors/emukit", false},
		{"vendors/daytona", "vendors/emukit", false},
		{"vendors/open", "vendors/emukit", false},
		{"provider/sandbox", "vendors/emukit", false},
		{"cmd/boxctl", "vendors/emukit", true},
		{"vendors/e2b/e2bemu", "provider/sandbox", false},
		{"vendors/e2b", "vendors/e2b/e2bemu", false},
		{"vendors/e2b", "vendors/docker", false},
		{"vendors/kubernetes", "vendors/docker", false},
		{"vendors/kubernetes", "vendors/boxproc", true},
		{"vendors", "vendors/boxproc", true},
		{"vendors/boxproc", "vendors", false},
		{"vendors/boxproc", "internal/vendorhttp", false},
		{"provider/sandbox", "vendors/boxproc", true},
		{"cmd/boxctl", "vendors/kubernetes", true},
		{"cmd/boxctl", "vendors/e2b/e2bemu", true},
		{"vendors/vendortest", "vendors", true},
		{"vendors/vendortest", "vendors/docker", false},
		{"boximage", "pins", true},
		{"boximage", "vendors", true},
		{"boximage", "vendors/e2b", false},
		{"boximage", "vendors/reaper", false},
		{"provider/sandbox", "vendors/reaper", true},
		{"cmd/boxctl/internal/boxstate", "vendors/reaper", true},
		{"cmd/boxctl/internal/boxstate", "vendors/open", true},
		{"cmd/boxctl/internal/turntext", "provider", true},
		{"provider", "cmd/boxctl/internal/turntext", false},
		{"provider/sandbox", "cmd/boxctl/internal/boxstate", false},
		{"conformance", "cmd/boxctl/internal/boxstate", false},
		{"vendors/kubernetes", "cmd/boxctl/internal/pool", false},
		{"internal/routerstub", "cmd/boxctl/internal/localrouter", false},
		{"vendors/e2b", "vendors/reaper", true},
		{"vendors/reaper", "vendors", true},
		{"vendors/reaper", "vendors/docker", false},
		{"vendors/open", "vendors/e2b", true},
		{"vendors/open", "vendors/e2b/e2bemu", false},
		{"vendors/e2b", "vendors/open", false},
		{"vendors", "vendors/reaper", false},
		{"conformance", "vendors/open", true},
		{"cmd/boxctl", "vendors/open", true},
		{"pins", "boximage", false},
		{"internal/dockerclient", "internal/buildinfo", true},
		{"vendors/boxmeta", "pins", false},
		{"conformance", "provider/sandbox", true},
		{"conformance", "vendors/docker", true},
		{"conformance", "bridge/server", false},
	}
	for _, tt := range tests {
		if got := allowed(tt.from, tt.to); got != tt.want {
			t.Errorf("allowed(%q, %q) = %v, want %v", tt.from, tt.to, got, tt.want)
		}
	}
}

func TestPermitted(t *testing.T) {
	tests := []struct {
		from, to string
		want     bool
	}{
		{"cmd/boxctl", "internal/testbed", false},
		{"cmd/boxctl", "vendors/e2b/e2bemu", true},
		{"vendors/vendortest", "vendors/e2b/e2bemu", false},
		{"cmd/boxctl", "internal/routerstub", true},
		{"cmd/box-bridge", "internal/boxbridgetest", false},
		{"provider/sandbox", "internal/boxbridgetest", false},
		{"bridge/harness", "internal/routerstub", true},
		{"bridge/harness", "provider", false},
		{"bridge/harness/harnesstest", "internal/routerstub", true},
		{"bridge/harness/harnesstest", "internal/testbed", true},
		{"bridge/harness/harnesstest", "provider", false},
		{"bridge/internal/bridgetest", "internal/boxbridgetest", true},
		{"bridge/internal/bridgetest", "internal/testbed", false},
		{"internal/npmtest", "internal/testbed", true},
		{"internal/testbed/cmd/testbedctl", "internal/testbed/baseimage", true},
		{"internal/boxbridgetest", "bridge", false},
		{"vendors/e2b/e2bemu", "vendors/docker", true},
		{"vendors/daytona/daytonaemu", "boximage", true},
		{"vendors/daytona", "boximage", false},
		{"vendors/e2b/e2bemu", "internal/testbed", false},
		{"vendors/daytona/daytonaemu", "vendors/docker", true},
		{"vendors/daytona/daytonaemu", "vendors/e2b", false},
		{"vendors/daytona", "vendors/daytona/daytonaemu", false},
		{"vendors/vendortest", "vendors", true},
		{"vendors/vendortest", "vendors/daytona/daytonaemu", false},
		{"boximage/ecrfake", "boximage", true},
		{"pins/pinstest", "internal/testbed", false},
		{"internal/boxtest", "boximage", true},
		{"internal/boxtest", "vendors/docker", false},
		{"vendors/vendortest", "internal/polltest", true},
		{"vendors/kubernetes", "internal/polltest", false},
		{"pins/pinstest", "internal/polltest", false},
		{"internal/polltest", "internal/testbed", false},
		{"internal/polltest", "internal/vendorhttp", false},
	}
	for _, tt := range tests {
		if got, why := permitted(tt.from, tt.to); got != tt.want {
			t.Errorf("permitted(%q, %q) = %v (%s), want %v", tt.from, tt.to, got, why, tt.want)
		}
	}
	for p, want := range map[string]bool{
		"boximage/ecrfake": true, "vendors/e2b/e2bemu": false, "vendors/daytona/daytonaemu": false, "bridge/internal/fakeclaude": true, "internal/npmtest": true,
		"internal/boxbridgetest": true, "vendors/e2b": false, "internal/routerstub": false, "internal/testbed": false,
	} {
		if got := looksTestOnly(p); got != want {
			t.Errorf("looksTestOnly(%q) = %v, want %v", p, got, want)
		}
	}
}
