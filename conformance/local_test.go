package conformance

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tangle-network/boxctl/internal/routerstub"
	"github.com/tangle-network/boxctl/pins"
)

// TestLocal_script checks the replies the local endpoint picks by the
// cases' prompt markers, for every harness the suite has a profile for.
func TestLocal_script(t *testing.T) {
	p, err := pins.Load()
	if err != nil {
		t.Fatal(err)
	}
	names := make([]string, 0, len(profiles))
	for n := range profiles {
		names = append(names, n)
	}
	hs, err := harnesses(p, names)
	if err != nil {
		t.Fatal(err)
	}
	for _, h := range hs {
		t.Run(h.Name(), func(t *testing.T) {
			cmd := "echo conformance-ok > /workspace/.m"
			got := pick(routerstub.Request{Prompt: "context\n" + toolPrompt(h, cmd)}).String()
			if want := "tool " + h.tool.Name + " " + h.tool.call(cmd); got != want {
				t.Errorf("pick(tool prompt) = %s, want %s", got, want)
			}
		})
	}
	for _, tt := range []struct {
		req  routerstub.Request
		want string
	}{
		{routerstub.Request{Prompt: plainPrompt}, `text "` + ReplyText + `" in 4 deltas`},
		{routerstub.Request{Prompt: stallPrompt + " (x)"}, "stall"},
		{routerstub.Request{Prompt: stallPrompt, ToolResult: true}, `text "` + ToolDoneText + `" in 2 deltas`},
		{routerstub.Request{Prompt: stallPrompt, Side: true}, `text "Conformance side reply." in 1 deltas`},
	} {
		if got := pick(tt.req).String(); got != tt.want {
			t.Errorf("pick(%q) = %s, want %s", tt.req.Prompt, got, tt.want)
		}
	}
}

// TestLocal_repo clones the served repository with the real git, at its
// tag and at its default branch.
func TestLocal_repo(t *testing.T) {
	l, err := StartLocal("127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	dir := filepath.Join(t.TempDir(), "clone")
	git := func(args ...string) string {
		t.Helper()
		cmd := exec.CommandContext(t.Context(), "git", args...)
		cmd.Env = append(os.Environ(), "GIT_TERMINAL_PROMPT=0")
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
		return strings.TrimSpace(string(out))
	}
	git("clone", "--quiet", "--", l.Repo.URL, dir)
	if b, err := os.ReadFile(filepath.Join(dir, l.Repo.File)); err != nil || strings.Contains(string(b), "first") {
		t.Errorf("default branch %s = %q, %v; want the second commit", l.Repo.File, b, err)
	}
	git("-C", dir, "checkout", "--quiet", l.Repo.GitRef, "--")
	if b, err := os.ReadFile(filepath.Join(dir, l.Repo.File)); err != nil || string(b) != l.Repo.Content {
		t.Errorf("%s at %s = %q, %v; want %q", l.Repo.File, l.Repo.GitRef, b, err, l.Repo.Content)
	}
	if n := git("-C", dir, "rev-list", "--count", "HEAD"); n != "1" {
		t.Errorf("%s has %s commits, want 1", l.Repo.GitRef, n)
	}
	if err := l.Close(); err != nil {
		t.Errorf("Close() = %v", err)
	}
}
