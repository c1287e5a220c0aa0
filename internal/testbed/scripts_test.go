package testbed

import (
	"bufio"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// scriptFiles returns the test bed's scripts and scripts/run, by path and
// content.
func scriptFiles(t *testing.T) map[string]string {
	t.Helper()
	root := filepath.Join("..", "..")
	paths, err := filepath.Glob(filepath.Join(root, "scripts", "testbed.d", "*.sh"))
	if err != nil {
		t.Fatal(err)
	}
	paths = append(paths, filepath.Join(root, "scripts", "testbed"), filepath.Join(root, "scripts", "run"))
	files := map[string]string{}
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		files[filepath.ToSlash(p)] = string(b)
	}
	if len(files) < 5 {
		t.Fatalf("found %d scripts, want the test bed's", len(files))
	}
	return files
}

// code drops a script's comment lines.
func code(src string) string {
	var b strings.Builder
	for _, line := range strings.Split(src, "\n") {
		if !strings.HasPrefix(strings.TrimSpace(line), "#") {
			b.WriteString(line + "\n")
		}
	}
	return b.String()
}

// TestScriptsAskForTheDir: Dir is the one computation of the test bed's
// directory; the scripts ask the Go helper (testbedctl dir, or
// scripts/testbed dir) instead of repeating its rules.
func TestScriptsAskForTheDir(t *testing.T) {
	for path, src := range scriptFiles(t) {
		for _, rule := range []string{"XDG_CACHE_HOME", ".cache/boxctl", "BOXCTL_TESTBED_DIR"} {
			if strings.Contains(code(src), rule) {
				t.Errorf("%s computes the test bed's directory itself (%s): ask `testbedctl dir`", path, rule)
			}
		}
	}
}

// TestScriptsRepeatNoGoModVersion: a version go.mod requires is read from
// go.mod (gomod_version), never written again in a script that names the
// module.
func TestScriptsRepeatNoGoModVersion(t *testing.T) {
	f, err := os.Open(filepath.Join("..", "..", "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	required := map[string][]string{} // version -> modules
	req := regexp.MustCompile(`^\s*(?:require\s+)?([a-z0-9.\-]+\.[a-z]+/\S+)\s+(v\d+\.\d+\.\d+\S*)`)
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if m := req.FindStringSubmatch(sc.Text()); m != nil {
			required[m[2]] = append(required[m[2]], m[1])
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if len(required) < 10 {
		t.Fatalf("read %d requirements from go.mod, want them all", len(required))
	}
	assign := regexp.MustCompile(`(?m)^\s*(?:local\s+)?([A-Z_]+)=["']?(v\d+\.\d+\.\d+[^"'\s]*)`)
	for path, src := range scriptFiles(t) {
		for _, m := range assign.FindAllStringSubmatch(code(src), -1) {
			// A version that only happens to equal another module's is
			// not a repeat: the script must name the module too.
			mods := slices.DeleteFunc(slices.Clone(required[m[2]]), func(mod string) bool { return !strings.Contains(src, mod) })
			if len(mods) > 0 {
				t.Errorf("%s sets %s=%s, the version go.mod requires of %s: read it with gomod_version", path, m[1], m[2], strings.Join(mods, " or "))
			}
		}
	}
}
