package depcheck

import (
	"go/parser"
	"go/token"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// knownUpwardTestImports are test files that import against the import
// direction today, by file (relative to the module root) and the package
// each imports. The rule holds for every other test file; an entry that
// no longer imports its package fails TestTestImportDirection, so the list
// only shrinks.
var knownUpwardTestImports = map[string][]string{}

// permittedInTest reports whether a test of our package from (its _test.go
// files, in-package or external) may import our package to, and why not.
// Tests follow the import direction of product code (permitted), plus
// what lies below them that product code keeps at arm's length:
//
//   - a package's tests import the package itself;
//   - a fake or test helper serves its part of the tree: a test imports
//     one in its own part (bridge/internal/schemacheck for bridge/wire),
//     or wherever it may import the helper's parent (vendors/vendortest
//     for every vendor), and a helper's tests import its listed extras;
//   - a leaf helper (internal/polltest, internal/goldentest) serves every
//     test, those of the packages that import nothing of ours too;
//   - provider/sandbox's and the reaper's tests run on real vendors
//     (vendors/...), and a vendor's tests on its own emulator;
//   - provider's tests run the real server the client speaks to, as a
//     vendor's tests run its emulator: they import bridge and its
//     subpackages (its helpers among them), but not what bridge keeps
//     internal.
func permittedInTest(from, to string) (bool, string) {
	if from == to {
		return true, ""
	}
	if from == "provider" && under(to, "bridge") && !slices.Contains(strings.Split(to, "/"), "internal") {
		return true, ""
	}
	if src, ok := testOnly[from]; ok && slices.ContainsFunc(src.extra, func(e string) bool { return under(to, e) }) {
		return true, ""
	}
	if dst, ok := testOnly[to]; ok {
		parent := path.Dir(to)
		if dst.leaf {
			return true, ""
		}
		if under(from, part(to)) || allowed(from, parent) {
			return true, ""
		}
		return false, "a test imports a " + string(dst.kind) + " of " + part(to) + ", beside " + parent + ", which its package may not import"
	}
	switch {
	case (under(from, "provider/sandbox") || from == "vendors/reaper") && under(to, "vendors"):
		return true, ""
	case under(from, "vendors") && under(to, part2(from)) && !under(from, "vendors/vendortest"):
		return true, ""
	case !allowed(from, to):
		return false, "against the architecture's import direction"
	}
	return true, ""
}

// part is the top-level part of the tree a package is in: bridge,
// vendors, internal, ...
func part(p string) string { return strings.Split(p, "/")[0] }

// part2 is the two-level part of a package: vendors/e2b for
// vendors/e2b/e2bemu.
func part2(p string) string {
	s := strings.Split(p, "/")
	return strings.Join(s[:min(2, len(s))], "/")
}

// testFileImports returns, for each of our packages a package's test files
// import, the files (relative to root) that import it.
func testFileImports(t *testing.T, root string, p pkg) map[string][]string {
	t.Helper()
	fset := token.NewFileSet()
	byImport := map[string][]string{}
	for _, name := range slices.Concat(p.TestGoFiles, p.XTestGoFiles) {
		file := filepath.Join(p.Dir, name)
		f, err := parser.ParseFile(fset, file, nil, parser.ImportsOnly)
		if err != nil {
			t.Fatalf("parse %s: %v", file, err)
		}
		relFile, err := filepath.Rel(root, file)
		if err != nil {
			t.Fatal(err)
		}
		for _, imp := range f.Imports {
			if ip, _ := strconv.Unquote(imp.Path.Value); strings.HasPrefix(ip, mod+"/") {
				byImport[rel(ip)] = append(byImport[rel(ip)], filepath.ToSlash(relFile))
			}
		}
	}
	return byImport
}

// testImportViolations returns one message per test file that imports one
// of our packages against permittedInTest, less the known ones, and the
// known ones that no longer hold.
func testImportViolations(t *testing.T, root string, pkgs []pkg, known map[string][]string) []string {
	t.Helper()
	var out []string
	seen := map[string]map[string]bool{}
	for _, p := range pkgs {
		from := rel(p.ImportPath)
		listed := slices.Concat(p.TestImports, p.XTestImports)
		if len(listed) == 0 {
			continue
		}
		files := testFileImports(t, root, p)
		for _, imp := range listed {
			if !strings.HasPrefix(imp, mod+"/") {
				continue
			}
			to := rel(imp)
			ok, why := permittedInTest(from, to)
			if ok {
				continue
			}
			for _, file := range slices.Compact(slices.Sorted(slices.Values(files[to]))) {
				if slices.Contains(known[file], to) {
					if seen[file] == nil {
						seen[file] = map[string]bool{}
					}
					seen[file][to] = true
					continue
				}
				out = append(out, file+" imports "+to+": "+why)
			}
		}
	}
	for file, tos := range known {
		for _, to := range tos {
			if !seen[file][to] {
				out = append(out, "knownUpwardTestImports lists "+file+" importing "+to+", which it no longer does: remove the entry")
			}
		}
	}
	slices.Sort(out)
	return out
}

// TestTestImportDirection holds tests to the import direction too: a test
// of the bridge that imported provider, say, would make the bridge's tests
// depend on the client side without a product import showing it.
func TestTestImportDirection(t *testing.T) {
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range testImportViolations(t, root, listPackages(t), knownUpwardTestImports) {
		t.Error(v)
	}
}

// TestTestImportViolations: a bridge test importing provider fails the
// rule, one on the known list does not, and a known entry that no longer
// holds fails too.
func TestTestImportViolations(t *testing.T) {
	root := t.TempDir()
	dir := filepath.Join(root, "bridge", "server")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	files := map[string]string{
		"up_test.go":    "package server_test\n\nimport _ \"" + mod + "/provider\"\n",
		"known_test.go": "package server_test\n\nimport _ \"" + mod + "/provider\"\n",
		"down_test.go":  "package server\n\nimport _ \"" + mod + "/bridge/wire\"\n",
	}
	for name, src := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	pkgs := []pkg{{
		ImportPath: mod + "/bridge/server", Dir: dir,
		TestGoFiles: []string{"down_test.go"}, XTestGoFiles: []string{"known_test.go", "up_test.go"},
		TestImports: []string{mod + "/bridge/wire"}, XTestImports: []string{mod + "/provider"},
	}}
	tests := []struct {
		name  string
		known map[string][]string
		want  []string
	}{
		{"upward imports fail", nil, []string{
			"bridge/server/known_test.go imports provider: against the architecture's import direction",
			"bridge/server/up_test.go imports provider: against the architecture's import direction",
		}},
		{"a known file passes", map[string][]string{"bridge/server/known_test.go": {"provider"}}, []string{
			"bridge/server/up_test.go imports provider: against the architecture's import direction",
		}},
		{"a stale known entry fails", map[string][]string{"bridge/server/down_test.go": {"provider"}}, []string{
			"bridge/server/known_test.go imports provider: against the architecture's import direction",
			"bridge/server/up_test.go imports provider: against the architecture's import direction",
			"knownUpwardTestImports lists bridge/server/down_test.go importing provider, which it no longer does: remove the entry",
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := testImportViolations(t, root, pkgs, tt.known)
			if !slices.Equal(got, tt.want) {
				t.Errorf("violations =\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(tt.want, "\n"))
			}
		})
	}
}

func TestPermittedInTest(t *testing.T) {
	tests := []struct {
		from, to string
		want     bool
	}{
		{"bridge", "internal/routerstub", true},
		{"bridge", "provider", false},
		{"bridge/server", "conformance", false},
		{"bridge/server", "bridge/internal/bridgetest", true},
		{"bridge/harness/claude", "bridge/harness/harnesstest", true},
		{"provider", "bridge/server", true},
		{"provider", "bridge/harness/harnesstest", true},
		{"provider", "bridge", true},
		{"provider/sandbox", "bridge/harness/harnesstest", false},
		{"provider", "internal/boxbridgetest", true},
		{"provider/sandbox", "vendors/docker", true},
		{"provider/sandbox", "bridge/server", false},
		{"provider/sandbox", "vendors/vendortest", true},
		{"vendors/docker", "vendors/vendortest", true},
		{"vendors/docker", "provider/sandbox", false},
		{"vendors/e2b", "provider/sandbox", false},
		{"vendors/e2b", "vendors/e2b/e2bemu", true},
		{"vendors/e2b", "vendors/daytona/daytonaemu", false},
		{"vendors/docker", "vendors/kubernetes", false},
		{"provider/sandbox", "vendors/e2b/e2bemu", true},
		{"bridge/wire", "bridge/internal/schemacheck", true},
		{"provider", "bridge/internal/bridgetest", false},
		{"vendors/kubernetes", "internal/kubetest", true},
		{"internal/kubetest", "vendors/kubernetes", true},
		{"internal/testbed", "vendors/docker", false},
		{"boximage", "boximage/ecrfake", true},
		{"pins", "boximage/ecrfake", false},
		{"bridge/wire", "bridge/wire", true},
		{"bridge/wire", "bridge/server", false},
		{"cmd/boxctl", "vendors/e2b/e2bemu", true},
		{"conformance", "conformance/internal/lossybridge", true},
		{"vendors/boxproc", "internal/polltest", true},
		{"bridge/wire", "internal/polltest", true},
		{"bridge/wire", "internal/goldentest", true},
		{"vendors/boxproc", "vendors/reaper", false},
	}
	for _, tt := range tests {
		if got, why := permittedInTest(tt.from, tt.to); got != tt.want {
			t.Errorf("permittedInTest(%q, %q) = %v (%s), want %v", tt.from, tt.to, got, why, tt.want)
		}
	}
}
