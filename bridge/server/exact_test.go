package server

import (
	"bufio"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/tangle-network/boxctl/bridge/wire"
)

// exactEnvRequest is a create request of the testkit's shape.
func exactEnvRequest(key string, lifetime int64) wire.ExactEnvironmentRequest {
	return wire.ExactEnvironmentRequest{IdempotencyKey: key, Image: wire.ExactImageBox,
		Egress: wire.ExactEgress{Mode: wire.EgressBlocked}, MaxLifetimeMS: lifetime,
		Resources: wire.ExactResources{CPU: 1, MemoryMB: 512, DiskMB: 1024},
		Metadata:  map[string]json.RawMessage{"executionId": json.RawMessage(`"` + key + `"`)}}
}

// newExact creates an exact environment and returns its id.
func newExact(t *testing.T, v *env, key string) string {
	t.Helper()
	code, res := postJSON[wire.ExactEnvironmentResult](t, v, "/v1/exact/environments", exactEnvRequest(key, 60_000))
	if code != http.StatusCreated || res.Status != wire.ExactCreated {
		t.Fatalf("create exact environment = %d %+v, want 201 created", code, res)
	}
	return res.Environment.ID
}

// spawnExact starts l and waits for its end; it returns the terminal
// status and both outputs.
func spawnExactAndWait(t *testing.T, v *env, id string, l wire.ExactLaunch) (wire.ExactProcessStatus, string, string) {
	t.Helper()
	code, st := postJSON[wire.ExactProcessStatus](t, v, "/v1/exact/environments/"+id+"/processes", l)
	if code != http.StatusCreated || st.PID < 1 {
		t.Fatalf("spawn %v = %d %+v, want 201 with a pid", l.Args, code, st)
	}
	base := fmt.Sprintf("/v1/exact/environments/%s/processes/%d", id, st.PID)
	for st.Running {
		resp := v.do(t, "GET", base+"?wait_ms=10000", "")
		st = decode[wire.ExactProcessStatus](t, resp)
	}
	return st, exactOutput(t, v, base, "stdout"), exactOutput(t, v, base, "stderr")
}

func exactOutput(t *testing.T, v *env, base, stream string) string {
	t.Helper()
	resp := v.do(t, "GET", base+"/output?stream="+stream, "")
	b, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s %s = %d %v", base, stream, resp.StatusCode, err)
	}
	return string(b)
}

func exitCode(n int) *wire.ExactTermination {
	return &wire.ExactTermination{Kind: wire.TerminationExit, ExitCode: &n}
}

// TestExact_Lifecycle follows an exact environment through the testkit's
// lifecycle checks: keyed create with replay and collision, a fresh
// environment, a file round trip with its bound, a process run with its
// output, status and an idempotent kill, lookup by id and metadata, and
// destruction.
func TestExact_Lifecycle(t *testing.T) {
	v := newEnv(t, config{})
	req := exactEnvRequest("execution-1", 60_000)
	code, first := postJSON[wire.ExactEnvironmentResult](t, v, "/v1/exact/environments", req)
	if code != http.StatusCreated || first.Status != wire.ExactCreated {
		t.Fatalf("create = %d %+v, want 201 created", code, first)
	}
	id := first.Environment.ID
	code, again := postJSON[wire.ExactEnvironmentResult](t, v, "/v1/exact/environments", req)
	if code != http.StatusOK || again.Status != wire.ExactReplayed || !cmp.Equal(again.Environment, first.Environment) {
		t.Errorf("repeated create = %d %+v, want 200 replayed %+v", code, again, first.Environment)
	}
	other := req
	other.MaxLifetimeMS += 1000
	code, conflict := postJSON[wire.ErrorResponse](t, v, "/v1/exact/environments", other)
	if code != http.StatusConflict || conflict.Error.Type != wire.TypeEnvironmentConflict {
		t.Errorf("create with the key and another lifetime = %d %+v, want 409 %s", code, conflict, wire.TypeEnvironmentConflict)
	}
	base := "/v1/exact/environments/" + id
	if got := decode[wire.ExactProcessList](t, v.do(t, "GET", base+"/processes", "")); len(got.Processes) != 0 {
		t.Errorf("processes of a fresh environment = %+v, want none", got.Processes)
	}

	content := []byte{0, 1, 2, 255}
	code, wrote := putExactFile(t, v, id, "/tmp/dir/a.bin", 0o640, content)
	if code != http.StatusOK || wrote.Size != 4 {
		t.Fatalf("write = %d %+v", code, wrote)
	}
	code, read := postJSON[wire.ExactFile](t, v, base+"/files/read", wire.ExactFileRead{Path: "/tmp/dir/a.bin", MaxBytes: 4})
	if got, _ := base64.StdEncoding.DecodeString(read.Content); code != http.StatusOK || string(got) != string(content) {
		t.Errorf("read = %d %v, want %v", code, got, content)
	}
	code, big := postJSON[wire.ErrorResponse](t, v, base+"/files/read", wire.ExactFileRead{Path: "/tmp/dir/a.bin", MaxBytes: 3})
	if code != http.StatusUnprocessableEntity || big.Error.Type != wire.TypeFileTooLarge {
		t.Errorf("read over maxBytes = %d %+v, want 422 %s", code, big, wire.TypeFileTooLarge)
	}

	// The process sees the file with its mode, as its owner.
	st, stdout, stderr := spawnExactAndWait(t, v, id, wire.ExactLaunch{Executable: "/bin/sh",
		Args: []string{"-c", `printf ok; printf err >&2; stat -c %a /tmp/dir/a.bin >&2`}, Cwd: "/tmp", Env: map[string]string{}})
	if stdout != "ok" || stderr != "err640\n" {
		t.Errorf("output = %q, %q; want ok, err640", stdout, stderr)
	}
	if st.Running || st.ExitCode != 0 || !cmp.Equal(st.Termination, exitCode(0)) {
		t.Errorf("status = %+v, want exit 0", st)
	}
	code, killed := postJSON[wire.ExactProcessStatus](t, v, fmt.Sprintf("%s/processes/%d/kill", base, st.PID), struct{}{})
	if code != http.StatusOK || !cmp.Equal(killed, st) {
		t.Errorf("kill after the end = %d %+v, want the status unchanged %+v", code, killed, st)
	}
	listed := decode[wire.ExactProcessList](t, v.do(t, "GET", base+"/processes", ""))
	if len(listed.Processes) != 1 || listed.Processes[0].PID != st.PID {
		t.Errorf("processes = %+v, want pid %d", listed.Processes, st.PID)
	}

	byMeta := func(meta string) []string {
		l := decode[wire.ExactEnvironmentList](t, v.do(t, "GET", "/v1/exact/environments?metadata="+url.QueryEscape(meta), ""))
		var ids []string
		for _, e := range l.Environments {
			ids = append(ids, e.ID)
		}
		return ids
	}
	if got := byMeta(`{"executionId":"execution-1"}`); !cmp.Equal(got, []string{id}) {
		t.Errorf("list by metadata = %v, want [%s]", got, id)
	}
	if got := byMeta(`{"executionId":"other"}`); len(got) != 0 {
		t.Errorf("list by other metadata = %v, want none", got)
	}

	if res := decode[wire.ExactDestroyResult](t, v.do(t, "DELETE", base, "")); res.Status != "destroyed" {
		t.Errorf("destroy = %+v, want destroyed", res)
	}
	if res := decode[wire.ExactDestroyResult](t, v.do(t, "DELETE", base, "")); res.Status != "already_destroyed" {
		t.Errorf("second destroy = %+v, want already_destroyed", res)
	}
	if resp := v.do(t, "GET", base, ""); resp.StatusCode != http.StatusNotFound {
		t.Errorf("GET a destroyed environment = %d, want 404", resp.StatusCode)
	}
	if got := byMeta(`{"executionId":"execution-1"}`); len(got) != 0 {
		t.Errorf("list after destroy = %v, want none", got)
	}
	if _, err := os.Stat(filepath.Join(v.dir, "data", "exact", id)); !os.IsNotExist(err) {
		t.Errorf("the destroyed environment's directory: %v, want it gone", err)
	}
	code, gone := postJSON[wire.ErrorResponse](t, v, "/v1/exact/environments", req)
	if code != http.StatusConflict {
		t.Errorf("create with a destroyed environment's key = %d %+v, want 409", code, gone)
	}
}

func putExactFile(t *testing.T, v *env, id, path string, mode int, b []byte) (int, wire.ExactFile) {
	t.Helper()
	body, _ := json.Marshal(wire.ExactFileWrite{Path: path, Mode: mode, Content: base64.StdEncoding.EncodeToString(b)})
	resp := v.do(t, "PUT", "/v1/exact/environments/"+id+"/files", string(body))
	return resp.StatusCode, decode[wire.ExactFile](t, resp)
}

// TestExact_Confinement runs processes that probe their jail: what they
// see of the host, their environment, network and limits, and how they
// end.
func TestExact_Confinement(t *testing.T) {
	v := newEnv(t, config{})
	req := exactEnvRequest("confinement", 60_000)
	req.Resources.DiskMB = 1
	code, res := postJSON[wire.ExactEnvironmentResult](t, v, "/v1/exact/environments", req)
	if code != http.StatusCreated {
		t.Fatalf("create = %d %+v", code, res)
	}
	id := res.Environment.ID
	// A file of the host's /tmp (the test's directory) and the bridge's
	// data directory are out of sight.
	hostFile := filepath.Join(v.dir, "host-secret")
	if err := os.WriteFile(hostFile, []byte("secret"), 0o644); err != nil {
		t.Fatal(err)
	}
	stdin := "from stdin"
	sh := func(script string) wire.ExactLaunch {
		return wire.ExactLaunch{Executable: "/bin/sh", Args: []string{"-c", script}, Cwd: "/tmp", Env: map[string]string{}}
	}
	withPath := wire.ExactLaunch{Executable: "/usr/bin/env", Args: []string{}, Cwd: "/tmp",
		Env: map[string]string{"PATH": "/usr/bin:/bin", "ONLY": "this"}}
	withPWD := withPath
	withPWD.Env = map[string]string{"PWD": "/elsewhere"}
	relative := wire.ExactLaunch{Executable: "printf", Args: []string{"%s", "found on PATH"}, Cwd: "/",
		Env: map[string]string{"PATH": "/usr/bin:/bin"}}
	cat := wire.ExactLaunch{Executable: "/bin/cat", Args: []string{}, Cwd: "/tmp", Env: map[string]string{}, Stdin: &stdin}
	timeout := wire.ExactLaunch{Executable: "/bin/sleep", Args: []string{"30"}, Cwd: "/tmp", Env: map[string]string{}, TimeoutMS: 300}
	ms := int64(300)
	tests := []struct {
		name   string
		launch wire.ExactLaunch
		stdout string
		term   *wire.ExactTermination
	}{
		{"environment is the launch's alone", withPath, "ONLY=this\nPATH=/usr/bin:/bin\n", exitCode(0)},
		{"the launch's own PWD is kept", withPWD, "PWD=/elsewhere\n", exitCode(0)},
		{"a relative executable is found on the launch's PATH", relative, "found on PATH", exitCode(0)},
		{"stdin is given", cat, stdin, exitCode(0)},
		{"the exit code is the process's", sh("exit 3"), "", exitCode(3)},
		{"the host's /tmp is private", sh("test -e " + hostFile + " && echo visible; ls /tmp"), "", exitCode(0)},
		{"the data directory is hidden", sh("test -e " + filepath.Join(v.dir, "data") + " && echo visible; true"), "", exitCode(0)},
		{"only loopback exists", sh("tail -n +3 /proc/net/dev | cut -d: -f1 | tr -d ' '"), "lo\n", exitCode(0)},
		{"the host is read-only", sh("echo x > /etc/exact-write 2>/dev/null && echo wrote; true"), "", exitCode(0)},
		{"one CPU for cpu 1", sh("nproc"), "1\n", exitCode(0)},
		{"a file beyond diskMb fails", sh("head -c 2000000 /dev/zero > /tmp/big 2>/dev/null || echo refused"), "refused\n", exitCode(0)},
		{"the timeout kills", timeout, "", &wire.ExactTermination{Kind: wire.TerminationTimeout, TimeoutMS: &ms}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			st, stdout, stderr := spawnExactAndWait(t, v, id, tt.launch)
			if stdout != tt.stdout || !cmp.Equal(st.Termination, tt.term) {
				t.Errorf("run = %+v, stdout %q (stderr %q); want %+v, stdout %q", st.Termination, stdout, stderr, tt.term, tt.stdout)
			}
		})
	}
}

// TestExact_KillAndFollow follows a running process's output while it
// runs, then kills it: the stream ends, and the status says SIGKILL.
func TestExact_KillAndFollow(t *testing.T) {
	v := newEnv(t, config{})
	id := newExact(t, v, "follow")
	code, st := postJSON[wire.ExactProcessStatus](t, v, "/v1/exact/environments/"+id+"/processes", wire.ExactLaunch{
		Executable: "/bin/sh", Args: []string{"-c", "echo first; while [ ! -e /tmp/go ]; do sleep 0.05; done; echo second; exec sleep 60"},
		Cwd: "/tmp", Env: map[string]string{}})
	if code != http.StatusCreated || !st.Running || st.ExitCode != -1 {
		t.Fatalf("spawn = %d %+v, want a running process", code, st)
	}
	base := fmt.Sprintf("/v1/exact/environments/%s/processes/%d", id, st.PID)
	resp := v.do(t, "GET", base+"/output?stream=stdout", "")
	br := bufio.NewReader(resp.Body)
	if line, err := br.ReadString('\n'); line != "first\n" {
		t.Fatalf("first line = %q, %v", line, err)
	}
	if code, _ := putExactFile(t, v, id, "/tmp/go", 0o644, nil); code != http.StatusOK {
		t.Fatalf("write /tmp/go = %d", code)
	}
	if line, err := br.ReadString('\n'); line != "second\n" {
		t.Fatalf("second line = %q, %v", line, err)
	}
	code, killed := postJSON[wire.ExactProcessStatus](t, v, base+"/kill", struct{}{})
	want := &wire.ExactTermination{Kind: wire.TerminationSignal, Signal: "SIGKILL"}
	if code != http.StatusOK || killed.Running || killed.ExitSignal != "SIGKILL" || !cmp.Equal(killed.Termination, want) {
		t.Errorf("kill = %d %+v, want SIGKILL", code, killed)
	}
	if rest, err := io.ReadAll(br); err != nil || rest != nil && len(rest) != 0 {
		t.Errorf("the stream after the kill = %q, %v; want its end", rest, err)
	}
}

// TestExact_Refusals checks that every route refuses what it cannot do
// with a typed error, weakening nothing.
func TestExact_Refusals(t *testing.T) {
	v := newEnv(t, config{})
	id := newExact(t, v, "refusals")
	base := "/v1/exact/environments/" + id
	env := func(f func(*wire.ExactEnvironmentRequest)) string {
		r := exactEnvRequest("refused", 60_000)
		f(&r)
		b, _ := json.Marshal(r)
		return string(b)
	}
	launch := func(f func(*wire.ExactLaunch)) string {
		l := wire.ExactLaunch{Executable: "/bin/true", Args: []string{}, Cwd: "/tmp", Env: map[string]string{}}
		f(&l)
		b, _ := json.Marshal(l)
		return string(b)
	}
	tests := []struct {
		name, method, path, body string
		status                   int
		typ                      string
	}{
		{"another image", "POST", "/v1/exact/environments", env(func(r *wire.ExactEnvironmentRequest) { r.Image = "debian@sha256:00" }), 400, wire.TypeInvalidRequest},
		{"strict egress", "POST", "/v1/exact/environments", env(func(r *wire.ExactEnvironmentRequest) {
			r.Egress = wire.ExactEgress{Mode: wire.EgressStrict, AllowDomains: []string{"example.com"}}
		}), 400, wire.TypeInvalidRequest},
		{"no metadata", "POST", "/v1/exact/environments", env(func(r *wire.ExactEnvironmentRequest) { r.Metadata = nil }), 400, wire.TypeInvalidRequest},
		{"no resources", "POST", "/v1/exact/environments", env(func(r *wire.ExactEnvironmentRequest) { r.Resources.MemoryMB = 0 }), 400, wire.TypeInvalidRequest},
		{"an unknown field", "POST", "/v1/exact/environments", `{"idempotencyKey":"x","shell":true}`, 400, wire.TypeInvalidRequest},
		{"metadata not an object", "GET", "/v1/exact/environments?metadata=%5B%5D", "", 400, wire.TypeInvalidRequest},
		{"an unknown environment", "GET", "/v1/exact/environments/xenv_none", "", 404, wire.TypeNotFound},
		{"a file outside /tmp", "PUT", base + "/files", `{"path":"/etc/passwd","mode":420,"content":""}`, 400, wire.TypeInvalidRequest},
		{"an unclean path", "PUT", base + "/files", `{"path":"/tmp/../etc/x","mode":420,"content":""}`, 400, wire.TypeInvalidRequest},
		{"content not base64", "PUT", base + "/files", `{"path":"/tmp/x","mode":420,"content":"!"}`, 400, wire.TypeInvalidRequest},
		{"a mode past 07777", "PUT", base + "/files", `{"path":"/tmp/x","mode":8192,"content":""}`, 400, wire.TypeInvalidRequest},
		{"a missing file", "POST", base + "/files/read", `{"path":"/tmp/none","maxBytes":10}`, 404, wire.TypeNotFound},
		{"a directory read as a file", "POST", base + "/files/read", `{"path":"/tmp/.","maxBytes":10}`, 400, wire.TypeInvalidRequest},
		{"a relative executable without PATH", "POST", base + "/processes", launch(func(l *wire.ExactLaunch) { l.Executable = "true" }), 400, wire.TypeInvalidRequest},
		{"a relative cwd", "POST", base + "/processes", launch(func(l *wire.ExactLaunch) { l.Cwd = "tmp" }), 400, wire.TypeInvalidRequest},
		{"no env", "POST", base + "/processes", `{"executable":"/bin/true","args":[],"cwd":"/tmp","timeoutMs":0}`, 400, wire.TypeInvalidRequest},
		{"a negative timeout", "POST", base + "/processes", launch(func(l *wire.ExactLaunch) { l.TimeoutMS = -1 }), 400, wire.TypeInvalidRequest},
		{"an unknown process", "GET", base + "/processes/7", "", 404, wire.TypeNotFound},
		{"a bad pid", "GET", base + "/processes/07", "", 400, wire.TypeInvalidRequest},
		{"the output of an unknown process", "GET", base + "/processes/7/output?stream=stdout", "", 404, wire.TypeNotFound},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp := v.do(t, tt.method, tt.path, tt.body)
			got := decode[wire.ErrorResponse](t, resp)
			if resp.StatusCode != tt.status || got.Error.Type != tt.typ {
				t.Errorf("%s %s = %d %+v, want %d %s", tt.method, tt.path, resp.StatusCode, got, tt.status, tt.typ)
			}
		})
	}
	// A link a process makes to the host is not followed by the bridge.
	st, _, _ := spawnExactAndWait(t, v, id, wire.ExactLaunch{Executable: "/bin/ln", Args: []string{"-s", "/etc/hostname", "/tmp/link"},
		Cwd: "/tmp", Env: map[string]string{}})
	if !cmp.Equal(st.Termination, exitCode(0)) {
		t.Fatalf("ln = %+v", st)
	}
	resp := v.do(t, "GET", fmt.Sprintf("%s/processes/%d/output?stream=stdin", base, st.PID), "")
	if got := decode[wire.ErrorResponse](t, resp); resp.StatusCode != http.StatusBadRequest || got.Error.Type != wire.TypeInvalidRequest {
		t.Errorf("output stream stdin = %d %+v, want 400", resp.StatusCode, got)
	}
	resp = v.do(t, "POST", base+"/files/read", `{"path":"/tmp/link","maxBytes":1000}`)
	if got := decode[wire.ErrorResponse](t, resp); resp.StatusCode != http.StatusBadRequest || !strings.Contains(got.Error.Message, "/tmp/link") {
		t.Errorf("read through a link out of /tmp = %d %+v, want 400", resp.StatusCode, got)
	}
}
