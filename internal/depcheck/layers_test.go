package depcheck

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// The tree has two layers. The SDK (sdkRoots) is what a Go program
// imports to drive boxes: the bridge, the provider, the sandbox provider,
// the vendors, the image builder, the pins and the conformance suite. The
// application (appRoot) is boxctl the program: the user's state file, the
// inspector, the local model endpoint's supervisor, the pool keepers and
// the terminal renderers; only cmd imports it. No SDK package writes
// terminal control sequences or knows boxctl's command line.
var sdkRoots = []string{"provider", "vendors", "bridge", "boximage", "pins", "conformance"}

const appRoot = "cmd/boxctl/internal"

// contracts are the packages whose children implement or build on them by
// design, and so may import them: the Vendor interface (every vendor
// under it), the harness adapter interface (every adapter under it), the
// bridge client (the sandbox provider builds on it), the test bed and the
// release builder (their own tools) and the egress policy (its
// enforcement beneath it). Any other child importing an ancestor fails.
var contracts = map[string]string{
	"vendors":          "the Vendor interface its vendors implement",
	"bridge/harness":   "the Adapter interface its harnesses implement",
	"provider":         "the bridge client the sandbox provider builds on",
	"internal/testbed": "the test bed, whose own tool lives beneath it",
	"internal/release": "the release builder, whose own tool lives beneath it",
	"vendors/egress":   "the egress policy its enforcement (firewall, relay, gate) applies",
}

func sdk(p string) bool {
	return slices.ContainsFunc(sdkRoots, func(r string) bool { return under(p, r) })
}

// layerErrors returns every import of pkgs that crosses the layers or
// reaches up to an ancestor that is not a contract: the SDK and the
// shared plumbing never import cmd, only cmd/boxctl imports the
// application, and no child imports its parent.
func layerErrors(pkgs []pkg) []string {
	var errs []string
	for _, p := range pkgs {
		from := rel(p.ImportPath)
		for _, imp := range p.Imports {
			if !strings.HasPrefix(imp, mod+"/") {
				continue
			}
			to := rel(imp)
			switch {
			case under(to, "cmd") && !under(from, "cmd"):
				errs = append(errs, from+" imports "+to+": only cmd imports the application")
			case under(to, appRoot) && !under(from, "cmd/boxctl"):
				errs = append(errs, from+" imports "+to+": only boxctl imports its application layer")
			case strings.HasPrefix(from, to+"/"):
				if _, ok := contracts[to]; !ok {
					errs = append(errs, from+" imports "+to+": a child never imports its parent")
				}
			}
		}
	}
	return errs
}

func TestLayers(t *testing.T) {
	for _, e := range layerErrors(listPackages(t)) {
		t.Error(e)
	}
}

// TestLayers_Planted shows each rule failing on a planted import.
func TestLayers_Planted(t *testing.T) {
	tests := []struct {
		from, to string
		want     string
	}{
		{"provider/sandbox", appRoot + "/boxstate", "only cmd imports the application"},
		{"conformance", appRoot + "/pool", "only cmd imports the application"},
		{"internal/tracing", "cmd/boxctl", "only cmd imports the application"},
		{"cmd/box-bridge", appRoot + "/inspector", "only boxctl imports its application layer"},
		{"provider/sandbox/pool", "provider/sandbox", "a child never imports its parent"},
		{appRoot + "/pool/keeper", appRoot + "/pool", "a child never imports its parent"},
		{"bridge/server/x", "bridge/server", "a child never imports its parent"},
	}
	for _, tt := range tests {
		errs := layerErrors([]pkg{{ImportPath: mod + "/" + tt.from, Imports: []string{mod + "/" + tt.to}}})
		if len(errs) != 1 || !strings.HasSuffix(errs[0], tt.want) {
			t.Errorf("planted %s -> %s: %q, want one error %q", tt.from, tt.to, errs, tt.want)
		}
	}
	for _, ok := range [][2]string{{"vendors/docker", "vendors"}, {"bridge/harness/pi", "bridge/harness"},
		{"provider/sandbox", "provider"}, {"cmd/boxctl", appRoot + "/pool"}, {appRoot + "/inspector", appRoot + "/boxstate"}} {
		if errs := layerErrors([]pkg{{ImportPath: mod + "/" + ok[0], Imports: []string{mod + "/" + ok[1]}}}); len(errs) != 0 {
			t.Errorf("%s -> %s: %q, want none", ok[0], ok[1], errs)
		}
	}
}

// sdkSourceErrors returns the SDK's product files (not tests, not test
// helpers or fakes) that write terminal control sequences or name one of
// boxctl's commands.
func sdkSourceErrors(t *testing.T, pkgs []pkg) []string {
	forbidden := map[string]string{
		`\x1b[`:       "writes terminal control sequences (a renderer belongs to the application)",
		`\033[`:       "writes terminal control sequences (a renderer belongs to the application)",
		"router-stub": "knows boxctl's command line",
	}
	var errs []string
	for _, p := range pkgs {
		path := rel(p.ImportPath)
		if _, test := testOnly[path]; !sdk(path) || test {
			continue
		}
		files, err := filepath.Glob(filepath.Join(p.Dir, "*.go"))
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range files {
			if strings.HasSuffix(f, "_test.go") {
				continue
			}
			b, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			for s, why := range forbidden {
				if strings.Contains(string(b), s) {
					errs = append(errs, path+"/"+filepath.Base(f)+" "+why)
				}
			}
		}
	}
	slices.Sort(errs)
	return errs
}

func TestSDKQuiet(t *testing.T) {
	for _, e := range sdkSourceErrors(t, listPackages(t)) {
		t.Error(e)
	}
}

func TestSDKQuiet_Planted(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "keep.go"), []byte("package pool\nconst clear = \"\\r\\x1b[K\"\nconst cmd = \"router-stub\"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	errs := sdkSourceErrors(t, []pkg{{ImportPath: mod + "/provider/sandbox/pool", Dir: dir}})
	if len(errs) != 2 {
		t.Errorf("planted escape and command line: %q, want two errors", errs)
	}
}
