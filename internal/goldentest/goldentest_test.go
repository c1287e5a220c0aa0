package goldentest

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// recorder is a test that keeps what it failed with.
type recorder struct {
	testing.TB
	failed []string
}

func (r *recorder) Helper() {}

func (r *recorder) Errorf(format string, args ...any) {
	r.failed = append(r.failed, fmt.Sprintf(format, args...))
}

func (r *recorder) Fatalf(format string, args ...any) {
	r.Errorf(format, args...)
	runtime.Goexit()
}

// check runs Check on a goroutine of its own, as the testing package runs
// a test, with -update set to rewrite, and returns what it failed with.
func check(t *testing.T, rewrite bool, path, got string) string {
	t.Helper()
	defer func(was bool) { *update = was }(*update)
	*update = rewrite
	r := &recorder{TB: t}
	done := make(chan struct{})
	go func() {
		defer close(done)
		Check(r, path, []byte(got))
	}()
	<-done
	return strings.Join(r.failed, "\n")
}

func TestCheck(t *testing.T) {
	path := filepath.Join(t.TempDir(), "testdata", "out.golden")
	cmd := "go test ./internal/goldentest -run '^TestCheck$' -update"
	if failed := check(t, false, path, "one\n"); !strings.Contains(failed, "no such file") || !strings.Contains(failed, cmd) {
		t.Errorf("Check() of a missing file failed with %q, want the error and %q", failed, cmd)
	}
	if failed := check(t, true, path, "one\n"); failed != "" {
		t.Errorf("Check() with -update failed with %q, want none", failed)
	}
	if b, err := os.ReadFile(path); string(b) != "one\n" {
		t.Errorf("golden file after -update = %q, %v; want %q", b, err, "one\n")
	}
	if failed := check(t, false, path, "one\n"); failed != "" {
		t.Errorf("Check() of the same text failed with %q, want none", failed)
	}
	failed := check(t, false, path, "two\n")
	for _, want := range []string{path + " differs", cmd, "one", "two"} {
		if !strings.Contains(failed, want) {
			t.Errorf("Check() of other text failed with %q, want it to hold %q", failed, want)
		}
	}
}
