package depcheck

import (
	"bytes"
	"encoding/json"
	"io"
	"os/exec"
	"strings"
	"testing"
)

const mod = "github.com/tangle-network/boxctl"

type pkg struct {
	ImportPath string
	Imports    []string
	Deps       []string
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

// isFake reports a package that exists only to test against: fakes of cloud
// control planes and test helpers.
func isFake(p string) bool {
	for _, seg := range strings.Split(p, "/") {
		if strings.HasSuffix(seg, "fake") || strings.HasSuffix(seg, "test") {
			return true
		}
	}
	return false
}

// allowed reports whether our package from may import our package to.
func allowed(from, to string) bool {
	if under(to, "internal") && !isFake(to) {
		return true
	}
	switch {
	case under(from, "cmd"):
		return true
	case under(from, "bridge/wire"):
		return false
	case under(from, "bridge"):
		return under(to, "bridge")
	case under(from, "provider/sandbox"):
		return under(to, "provider") || under(to, "vendors") || under(to, "pins") || under(to, "bridge/wire")
	case under(from, "provider"):
		return under(to, "provider") || under(to, "bridge/wire")
	case under(from, "vendors"):
		// vendors -> vendors (the interface package) only; no vendor imports another.
		if to == "vendors" {
			return true
		}
		fromVendor := strings.Split(from, "/")[1:]
		toParts := strings.Split(to, "/")
		return len(fromVendor) > 0 && len(toParts) > 1 && toParts[0] == "vendors" && toParts[1] == fromVendor[0]
	case under(from, "boximage"):
		return under(to, "boximage") || under(to, "pins")
	case under(from, "pins"):
		return under(to, "pins")
	case under(from, "conformance"):
		return under(to, "conformance") || under(to, "provider") || under(to, "vendors") ||
			under(to, "boximage") || under(to, "pins") || under(to, "bridge/wire")
	}
	return false
}

func TestImportDirection(t *testing.T) {
	for _, p := range listPackages(t) {
		from := rel(p.ImportPath)
		for _, imp := range p.Imports {
			if !strings.HasPrefix(imp, mod+"/") {
				continue
			}
			to := rel(imp)
			if isFake(to) && !isFake(from) {
				t.Errorf("%s imports %s: product code never imports a fake or test helper", from, to)
				continue
			}
			if !isFake(from) && !allowed(from, to) {
				t.Errorf("%s imports %s: against the architecture's import direction", from, to)
			}
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
	}
	for _, p := range listPackages(t) {
		if rel(p.ImportPath) != "cmd/box-bridge" {
			continue
		}
		for _, d := range p.Deps {
			for _, f := range forbidden {
				if under(d, f) {
					t.Errorf("cmd/box-bridge links %s (via %s)", f, d)
				}
			}
		}
	}
}

func TestAllowed(t *testing.T) {
	tests := []struct {
		from, to string
		want     bool
	}{
		{"cmd/boxctl", "vendors/docker", true},
		{"bridge/server", "bridge/wire", true},
		{"bridge/server", "provider", false},
		{"bridge/wire", "bridge/store", false},
		{"provider", "bridge/wire", true},
		{"provider", "bridge/server", false},
		{"provider/sandbox", "vendors", true},
		{"vendors/docker", "vendors", true},
		{"vendors/docker", "vendors/e2b", false},
		{"vendors/e2b", "vendors/e2b/api", true},
		{"boximage", "pins", true},
		{"pins", "boximage", false},
		{"conformance", "provider/sandbox", true},
		{"bridge/engine", "internal/buildinfo", true},
	}
	for _, tt := range tests {
		if got := allowed(tt.from, tt.to); got != tt.want {
			t.Errorf("allowed(%q, %q) = %v, want %v", tt.from, tt.to, got, tt.want)
		}
	}
	if !isFake("vendors/e2b/e2bfake") || !isFake("internal/npmtest") || isFake("vendors/e2b") {
		t.Error("isFake misclassifies")
	}
}
