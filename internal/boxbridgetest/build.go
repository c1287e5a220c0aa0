package boxbridgetest

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sync"
	"testing"
)

// scratch is the directory binaries are built into; Main sets it.
var scratch string

// Main runs a package's tests (and benchmarks) with a scratch directory
// for built binaries, removes it, and exits with the tests' status.
func Main(m *testing.M) {
	dir, err := os.MkdirTemp("", "boxbridgetest-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "boxbridgetest: scratch directory:", err)
		os.Exit(2)
	}
	scratch = dir
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

type build struct {
	once sync.Once
	path string
	err  error
}

var (
	buildsMu sync.Mutex
	builds   = map[string]*build{}
)

// moduleDir is the directory of this module's go.mod.
func moduleDir() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..")
}

// Binary builds the main package pkg (a path relative to the module root,
// such as "bridge/internal/fakeclaude") static with CGO off, -trimpath and
// stripped, as the Makefile does, once per test binary, and returns the
// path of the executable, named name. A failed build fails every test that
// asks for it.
func Binary(t testing.TB, pkg, name string) string {
	t.Helper()
	if scratch == "" {
		t.Fatal("boxbridgetest: the package's tests do not run through boxbridgetest.Main; " +
			"add `func TestMain(m *testing.M) { boxbridgetest.Main(m) }`")
	}
	buildsMu.Lock()
	b := builds[pkg]
	if b == nil {
		b = &build{}
		builds[pkg] = b
	}
	buildsMu.Unlock()
	b.once.Do(func() {
		dir := filepath.Join(scratch, filepath.Base(pkg))
		if err := os.MkdirAll(dir, 0o755); err != nil {
			b.err = err
			return
		}
		b.path = filepath.Join(dir, name)
		cmd := exec.Command("go", "build", "-trimpath", "-ldflags", "-s -w", "-o", b.path, "./"+pkg)
		cmd.Dir = moduleDir()
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := cmd.CombinedOutput(); err != nil {
			b.err = fmt.Errorf("go build ./%s: %w: %s", pkg, err, out)
		}
	})
	if b.err != nil {
		t.Fatalf("boxbridgetest: %v", b.err)
	}
	return b.path
}

// Build returns the path of the static box-bridge binary, built once per
// test binary.
func Build(t testing.TB) string {
	t.Helper()
	return Binary(t, "cmd/box-bridge", "box-bridge")
}
