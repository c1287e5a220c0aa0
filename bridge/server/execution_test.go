package server

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/tangle-network/boxctl/bridge/engine"
	"github.com/tangle-network/boxctl/bridge/jail"
	"github.com/tangle-network/boxctl/bridge/store"
	"github.com/tangle-network/boxctl/bridge/wire"
)

// bwrapCopy copies the installed bwrap into a directory of the test's, so
// that a test can take it away.
func bwrapCopy(t *testing.T) string {
	t.Helper()
	src, err := exec.LookPath("bwrap")
	if err != nil {
		t.Fatal("bwrap is not installed: run ./scripts/testbed up (or apt-get install -y bubblewrap)")
	}
	b, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	dst := filepath.Join(t.TempDir(), "bwrap")
	if err := os.WriteFile(dst, b, 0o755); err != nil {
		t.Fatal(err)
	}
	return dst
}

func execBody(runID, prompt, cwd, execution string) string {
	return chatBody(runID, prompt, false, fmt.Sprintf(`"cwd":%q`, cwd), `"execution":`+execution)
}

// TestExecution_Refusals checks that every execution the bridge does not
// run is refused before anything starts, with its typed error and status.
func TestExecution_Refusals(t *testing.T) {
	project := t.TempDir()
	v := newEnv(t, config{engine: engine.Options{RouterURL: "https://router.example.com/v1"}})
	noRouter := newEnv(t, config{})
	noBwrap := newEnv(t, config{engine: engine.Options{Bwrap: "/nonexistent/bwrap", RouterURL: "https://router.example.com/v1"}})
	for _, tc := range []struct {
		name      string
		v         *env
		execution string
		status    int
		typ, code string
		msg       string // part of the message
	}{
		{"sandbox kind", v, `{"kind":"sandbox","repoUrl":"https://github.com/a/b"}`, 400, wire.TypeSandboxUnsupported, "", "execution.kind=host"},
		{"net-jail with a sandbox", v, `{"kind":"sandbox","netJail":{"mode":"net-jail"}}`, 501, wire.TypeExecutorMisconfigured, "", "EgressPolicy"},
		{"unknown field", v, `{"kind":"host","jial":{"mode":"fs-jail"}}`, 400, wire.TypeInvalidRequest, "", "jial"},
		{"unknown jail mode", v, `{"kind":"host","jail":{"mode":"fs_jail"}}`, 400, wire.TypeInvalidRequest, "", "fs_jail"},
		{"unknown kind", v, `{"kind":"cloud"}`, 400, wire.TypeInvalidRequest, "", "cloud"},
		{"no kind", v, `{"jail":{"mode":"fs-jail"}}`, 400, wire.TypeInvalidRequest, "", "kind"},
		{"zero timeout", v, `{"kind":"host","timeoutMs":0}`, 400, wire.TypeInvalidRequest, "", "timeoutMs"},
		{"fractional timeout", v, `{"kind":"host","timeoutMs":1.5}`, 400, wire.TypeInvalidRequest, "", "timeoutMs"},
		{"sandbox field on host", v, `{"kind":"host","repoUrl":"https://github.com/a/b"}`, 400, wire.TypeInvalidRequest, "", "repoUrl"},
		{"jail root outside the project", v, `{"kind":"host","jail":{"mode":"write-jail","root":"/etc"}}`, 400, wire.TypeInvalidRequest, "", "jail.root"},
		{"net-jail allow list not the enforced one", v, `{"kind":"host","netJail":{"mode":"net-jail","allow":["api.anthropic.com"]}}`,
			501, wire.TypeExecutorMisconfigured, "", "router.example.com:443"},
		{"net-jail allow list malformed", v, `{"kind":"host","netJail":{"mode":"net-jail","allow":["a b"]}}`, 400, wire.TypeInvalidRequest, "", "allow"},
		{"net-jail without a model endpoint", noRouter, `{"kind":"host","netJail":{"mode":"net-jail"}}`, 501, wire.TypeExecutorMisconfigured, "", "TANGLE_ROUTER_URL"},
		{"fs-jail without bwrap", noBwrap, `{"kind":"host","jail":{"mode":"fs-jail"}}`, 501, wire.TypeNotConfigured, jail.ReasonBwrapMissing, "bubblewrap"},
		{"net-jail without bwrap", noBwrap, `{"kind":"host","netJail":{"mode":"net-jail"}}`, 501, wire.TypeNotConfigured, jail.ReasonBwrapMissing, "unconfined"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			runID := "refused-" + strconv.Itoa(len(tc.name)) + "-" + strings.ReplaceAll(tc.name, " ", "-")
			resp := tc.v.do(t, "POST", "/v1/chat/completions", execBody(runID, "hello", project, tc.execution))
			e := decode[wire.ErrorResponse](t, resp).Error
			if resp.StatusCode != tc.status || e.Type != tc.typ || e.Code != tc.code || e.Status != tc.status || !strings.Contains(e.Message, tc.msg) {
				t.Errorf("POST with execution %s = %d %+v, want %d %s code %q mentioning %q", tc.execution, resp.StatusCode, e, tc.status, tc.typ, tc.code, tc.msg)
			}
			// Nothing started.
			if resp := tc.v.do(t, "GET", "/v1/runs/"+runID, ""); resp.StatusCode != http.StatusNotFound {
				t.Errorf("GET the refused run = %d, want 404", resp.StatusCode)
			}
		})
	}

	t.Run("retained sessions refuse a sandbox before creating anything", func(t *testing.T) {
		for i, execution := range []string{`{"kind":"sandbox"}`, `{"kind":"sandbox","netJail":{"mode":"net-jail"}}`} {
			id := "sandboxed-" + strconv.Itoa(i)
			resp := v.do(t, "POST", "/v1/sessions", fmt.Sprintf(`{"id":%q,"model":"claude-code/sonnet","execution":%s}`, id, execution))
			e := decode[wire.ErrorResponse](t, resp).Error
			if resp.StatusCode != 501 || e.Type != wire.TypeCapabilityDenied || !strings.Contains(e.Message, "cannot execute in a sandbox") {
				t.Errorf("create session with %s = %d %+v, want 501 %s", execution, resp.StatusCode, e, wire.TypeCapabilityDenied)
			}
			if resp := v.do(t, "GET", "/v1/sessions/"+id, ""); resp.StatusCode != http.StatusNotFound {
				t.Errorf("GET the refused session = %d, want 404", resp.StatusCode)
			}
		}
	})
	t.Run("retained sessions refuse a jail the host cannot enforce", func(t *testing.T) {
		resp := noBwrap.do(t, "POST", "/v1/sessions", fmt.Sprintf(`{"id":"jailed","model":"claude-code/sonnet","cwd":%q,"execution":{"kind":"host","jail":{"mode":"fs-jail"}}}`, project))
		e := decode[wire.ErrorResponse](t, resp).Error
		if resp.StatusCode != 501 || e.Type != wire.TypeNotConfigured || e.Code != jail.ReasonBwrapMissing {
			t.Errorf("create a jailed session without bwrap = %d %+v, want 501 %s", resp.StatusCode, e, wire.TypeNotConfigured)
		}
		if resp := noBwrap.do(t, "GET", "/v1/sessions/jailed", ""); resp.StatusCode != http.StatusNotFound {
			t.Errorf("GET the refused session = %d, want 404", resp.StatusCode)
		}
	})
	t.Run("a jail that went away is refused at the next turn", func(t *testing.T) {
		bwrap := bwrapCopy(t)
		gone := newEnv(t, config{engine: engine.Options{Bwrap: bwrap}})
		createSession(t, gone, "s1", fmt.Sprintf(`,"cwd":%q,"execution":{"kind":"host","jail":{"mode":"write-jail"}}`, project))
		if err := os.Remove(bwrap); err != nil {
			t.Fatal(err)
		}
		resp := gone.do(t, "POST", "/v1/sessions/s1/turns", turnBody("t1", "r1", "hello"))
		e := decode[wire.ErrorResponse](t, resp).Error
		if resp.StatusCode != 501 || e.Type != wire.TypeNotConfigured || e.Code != jail.ReasonBwrapMissing {
			t.Errorf("turn after bwrap went away = %d %+v, want 501 %s", resp.StatusCode, e, wire.TypeNotConfigured)
		}
		if resp := gone.do(t, "GET", "/v1/runs/r1", ""); resp.StatusCode != http.StatusNotFound {
			t.Errorf("GET the refused turn's run = %d, want 404", resp.StatusCode)
		}
		// The root document says so too, from that probe.
		var root struct {
			Capabilities struct {
				Execution wire.ExecutionCaps `json:"execution"`
			} `json:"capabilities"`
		}
		if err := json.NewDecoder(gone.do(t, "GET", "/", "").Body).Decode(&root); err != nil {
			t.Fatal(err)
		}
		if x := root.Capabilities.Execution; fmt.Sprint(x.Jail.Modes) != "[off]" || x.Jail.Unavailable == "" {
			t.Errorf("GET / capabilities.execution after bwrap went away = %+v, want only off", x)
		}
	})
}

// TestExecution_RetainedJailed runs the turns of an fs- and net-jailed
// retained session in its long-lived jailed process: writes outside the
// project and reads of the bridge's store fail, the jail's home is in
// place, and every turn reaches the model endpoint through the same jail.
func TestExecution_RetainedJailed(t *testing.T) {
	router := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "hi") }))
	t.Cleanup(router.Close)
	project, outside := t.TempDir(), t.TempDir()
	v := newEnv(t, config{engine: engine.Options{RouterURL: router.URL}})
	createSession(t, v, "s1", fmt.Sprintf(`,"cwd":%q,"execution":{"kind":"host","jail":{"mode":"fs-jail"},"netJail":{"mode":"net-jail"},"timeoutMs":60000}`, project))
	storeFile := filepath.Join(v.dir, "data", store.FileName)
	for i, tc := range []struct{ prompt, want string }{
		{"model", "ok 200 hi"},
		{"write:" + filepath.Join(outside, "made"), "fail: "},
		{"read:" + storeFile, "fail: "},
		{"write:" + filepath.Join(project, "made"), "ok"},
		{"write:" + filepath.Join(project, ".agent-home", ".cache", "made"), "ok"},
		{"model", "ok 200 hi"},
		{"dial:" + strings.TrimPrefix(v.url, "http://"), "fail: "},
	} {
		turn, run := "t"+strconv.Itoa(i), "r"+strconv.Itoa(i)
		postTurn(t, v, "s1", turnBody(turn, run, tc.prompt))
		got := frameText(openEvents(t, v, "/v1/runs/"+run+"/events", "").until(isTerminal))
		if !strings.HasPrefix(got, tc.want) {
			t.Errorf("jailed retained turn %q = %q, want %q...", tc.prompt, got, tc.want)
		}
		if s := waitRun(t, v, run); s.Status != wire.StatusDone {
			t.Errorf("jailed retained turn %q = %+v, want done", tc.prompt, s)
		}
	}
	if _, err := os.Stat(filepath.Join(outside, "made")); !os.IsNotExist(err) {
		t.Errorf("the jailed write outside the project reached the host (err %v)", err)
	}
	if b, err := os.ReadFile(filepath.Join(project, ".agent-home", ".gitignore")); err != nil || string(b) != "*\n" {
		t.Errorf("jail root .gitignore = %q, %v; want *", b, err)
	}
}

// TestExecution_CancelJailed cancels a net- and fs-jailed turn: the
// harness gets its SIGTERM through the jail (the relay outlives it), ends
// its turn, and nothing of the run is left running.
func TestExecution_CancelJailed(t *testing.T) {
	project := t.TempDir()
	v := newEnv(t, config{engine: engine.Options{RouterURL: "http://127.0.0.1:9"}})
	resp := v.do(t, "POST", "/v1/chat/completions", chatBody("jailed-cancel", "graceful", true, fmt.Sprintf(`"cwd":%q`, project),
		`"execution":{"kind":"host","jail":{"mode":"fs-jail"},"netJail":{"mode":"net-jail"}}`))
	if resp.StatusCode != 200 {
		t.Fatalf("POST = %d %+v", resp.StatusCode, decode[wire.ErrorResponse](t, resp).Error)
	}
	defer resp.Body.Close()
	// Wait for the turn's first text: the harness is running in the jail.
	buf := make([]byte, 4096)
	var seen bytes.Buffer
	for !strings.Contains(seen.String(), "working") {
		n, err := resp.Body.Read(buf)
		seen.Write(buf[:n])
		if err != nil {
			t.Fatalf("stream ended before the harness worked: %v; %s", err, seen.String())
		}
	}
	cancel := v.do(t, "POST", "/v1/runs/jailed-cancel/cancel?wait_ms=10000", "")
	var out struct {
		Terminal bool             `json:"terminal"`
		Run      wire.RunSnapshot `json:"run"`
	}
	if err := json.NewDecoder(cancel.Body).Decode(&out); err != nil || cancel.StatusCode != 200 || out.Run.Status != wire.StatusCancelled {
		t.Fatalf("cancel = %d %+v (%v), want 200 cancelled", cancel.StatusCode, out, err)
	}
	if pids := marked(t, engine.MarkerVar+"=jailed-cancel"); len(pids) > 0 {
		t.Errorf("processes of the cancelled jailed run still running: %v", pids)
	}
}

// marked lists the live processes whose environment holds entry.
func marked(t *testing.T, entry string) []int {
	t.Helper()
	dirs, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatal(err)
	}
	var pids []int
	for _, d := range dirs {
		pid, err := strconv.Atoi(d.Name())
		if err != nil {
			continue
		}
		env, err := os.ReadFile(filepath.Join("/proc", d.Name(), "environ"))
		if err != nil {
			continue
		}
		stat, _ := os.ReadFile(filepath.Join("/proc", d.Name(), "stat"))
		if i := bytes.LastIndexByte(stat, ')'); i > 0 && len(stat) > i+2 && stat[i+2] == 'Z' {
			continue
		}
		for _, kv := range bytes.Split(env, []byte{0}) {
			if string(kv) == entry {
				pids = append(pids, pid)
			}
		}
	}
	return pids
}
