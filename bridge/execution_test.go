package bridge

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tangle-network/boxctl/bridge/store"
	"github.com/tangle-network/boxctl/bridge/wire"
)

// needBwrap skips nothing: jailed execution is part of the bridge, and the
// test bed installs bubblewrap. It fails with the way to get it.
func needBwrap(t *testing.T) {
	t.Helper()
	if _, err := exec.LookPath("bwrap"); err != nil {
		t.Fatal("bwrap is not installed: run ./scripts/testbed up (or apt-get install -y bubblewrap)")
	}
}

// jailedTurn runs one non-streaming chat turn of fakeclaude with the
// execution object exec in cwd, and returns the completion's text or its
// error.
func jailedTurn(t *testing.T, b *bridgeProc, runID, prompt, cwd, exec string) (string, *wire.ErrorBody) {
	t.Helper()
	body := fmt.Sprintf(`{"model":"claude-code/sonnet","run_id":%q,"cwd":%q,"execution":%s,"messages":[{"role":"user","content":%q}]}`,
		runID, cwd, exec, prompt)
	resp := b.req(t, context.Background(), "POST", "/v1/chat/completions", body)
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		var e wire.ErrorResponse
		if err := json.Unmarshal(raw, &e); err != nil {
			t.Fatalf("POST %s = %d %s", body, resp.StatusCode, raw)
		}
		return "", &e.Error
	}
	var c wire.Completion
	if err := json.Unmarshal(raw, &c); err != nil || len(c.Choices) != 1 {
		t.Fatalf("completion %s: %v", raw, err)
	}
	return c.Choices[0].Message.Content, c.Error
}

// TestExecution_Jailed runs fakeclaude in a real box-bridge under real
// bwrap: a write-jailed turn cannot write outside its project directory,
// an fs-jailed one cannot read the bridge's data directory, a net-jailed
// one reaches the model endpoint and not another local listener, and
// timeoutMs bounds a turn.
func TestExecution_Jailed(t *testing.T) {
	needBwrap(t)
	router := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "model answered %s", r.URL.Path)
	}))
	t.Cleanup(router.Close)
	other, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { other.Close() })
	go func() {
		for {
			c, err := other.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	data, project, outside := t.TempDir(), t.TempDir(), t.TempDir()
	if err := os.WriteFile(filepath.Join(outside, "secret"), []byte("s"), 0o644); err != nil {
		t.Fatal(err)
	}
	b := startBridge(t, data, "TANGLE_ROUTER_URL="+router.URL)
	store := filepath.Join(data, store.FileName)
	const (
		write = `{"kind":"host","jail":{"mode":"write-jail"}}`
		fs    = `{"kind":"host","jail":{"mode":"fs-jail"}}`
		net   = `{"kind":"host","jail":{"mode":"fs-jail"},"netJail":{"mode":"net-jail"}}`
		nojl  = `{"kind":"host"}`
	)
	for _, tc := range []struct {
		name, exec, prompt string
		want               string // the reply, or its prefix before "..."
	}{
		{"write-jail writes its project", write, "write:" + filepath.Join(project, "made"), "ok"},
		{"write-jail cannot write outside", write, "write:" + filepath.Join(outside, "made"), "fail: ..."},
		{"write-jail cannot write the data dir", write, "write:" + filepath.Join(data, "made"), "fail: ..."},
		{"write-jail cannot read the store", write, "read:" + store, "fail: ..."},
		{"fs-jail cannot read the store", fs, "read:" + store, "fail: ..."},
		{"fs-jail cannot read outside", fs, "read:" + filepath.Join(outside, "secret"), "fail: ..."},
		{"fs-jail cannot write outside", fs, "write:" + filepath.Join(outside, "made"), "fail: ..."},
		{"fs-jail writes its project", fs, "write:" + filepath.Join(project, "made2"), "ok"},
		{"net-jail reaches the model endpoint", net, "model", "ok 200 model answered /v1/messages"},
		{"net-jail cannot reach another local listener", net, "dial:" + other.Addr().String(), "fail: ..."},
		{"net-jail cannot reach the bridge", net, "dial:" + strings.TrimPrefix(b.URL, "http://"), "fail: ..."},
		{"unjailed turns read the store", nojl, "read:" + store, "ok"},
		{"unjailed turns reach another local listener", nojl, "dial:" + other.Addr().String(), "ok"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			runID := "jail-" + strings.NewReplacer(" ", "-", "'", "").Replace(tc.name)
			got, e := jailedTurn(t, b, runID, tc.prompt, project, tc.exec)
			if e != nil {
				t.Fatalf("turn %q = error %+v", tc.prompt, e)
			}
			if prefix, ok := strings.CutSuffix(tc.want, "..."); ok {
				if !strings.HasPrefix(got, prefix) {
					t.Errorf("turn %q = %q, want %q...", tc.prompt, got, prefix)
				}
			} else if got != tc.want {
				t.Errorf("turn %q = %q, want %q", tc.prompt, got, tc.want)
			}
		})
	}
	for _, p := range []string{filepath.Join(outside, "made"), filepath.Join(data, "made")} {
		if _, err := os.Stat(p); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s exists after a jailed write (err %v)", p, err)
		}
	}
	if _, err := os.Stat(filepath.Join(project, "made")); err != nil {
		t.Errorf("the write-jailed write of the project left nothing: %v", err)
	}

	t.Run("timeoutMs bounds the turn", func(t *testing.T) {
		_, e := jailedTurn(t, b, "jail-timeout", "stall", project, `{"kind":"host","timeoutMs":300,"jail":{"mode":"fs-jail"}}`)
		if e == nil || e.Type != wire.TypeHarnessTimeout || !strings.Contains(e.Message, "300ms") {
			t.Errorf("stalled turn with timeoutMs 300 = %+v, want %s after 300ms", e, wire.TypeHarnessTimeout)
		}
	})
	t.Run("root document states the enforced modes", func(t *testing.T) {
		resp := b.req(t, context.Background(), "GET", "/", "")
		defer resp.Body.Close()
		var root struct {
			Capabilities struct {
				Execution wire.ExecutionCaps `json:"execution"`
			} `json:"capabilities"`
		}
		if err := json.NewDecoder(resp.Body).Decode(&root); err != nil {
			t.Fatal(err)
		}
		x := root.Capabilities.Execution
		u := strings.TrimPrefix(router.URL, "http://")
		if fmt.Sprint(x.Jail.Modes, x.NetJail.Modes, x.NetJail.Allow, x.Kinds) != "[off write-jail fs-jail] [off net-jail] ["+u+"] [host]" {
			t.Errorf("GET / capabilities.execution = %+v", x)
		}
	})
}
