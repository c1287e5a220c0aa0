package server

import (
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tangle-network/boxctl/bridge/wire"
	"github.com/tangle-network/boxctl/internal/polltest"
)

// TestExec runs commands through POST /v1/exec: output, exit status,
// stdin, the environment (the harnesses', never the bridge's own
// configuration), a timeout that ends the command's whole process group,
// the output bound, and refusals with their types.
func TestExec(t *testing.T) {
	childPid := filepath.Join(t.TempDir(), "child.pid")
	t.Setenv("BRIDGE_EXEC_TEST_SECRET", "not-for-commands")
	t.Setenv("HARNESS_ONLY", "yes")
	v := newEnv(t, config{})
	post := func(t *testing.T, body string) (int, wire.ExecResult, wire.ErrorResponse) {
		t.Helper()
		resp := v.do(t, "POST", "/v1/exec", body)
		defer resp.Body.Close()
		raw, _ := io.ReadAll(resp.Body)
		var res wire.ExecResult
		var e wire.ErrorResponse
		if resp.StatusCode == http.StatusOK {
			if err := json.Unmarshal(raw, &res); err != nil {
				t.Fatalf("answer %s: %v", raw, err)
			}
		} else {
			_ = json.Unmarshal(raw, &e)
		}
		return resp.StatusCode, res, e
	}
	for _, tc := range []struct {
		name, body     string
		exit           int
		stdout, stderr string
		check          func(t *testing.T, res wire.ExecResult)
	}{
		{name: "output and exit status", body: `{"command":["sh","-c","echo out; echo err >&2; exit 3"]}`, exit: 3, stdout: "out\n", stderr: "err\n"},
		{name: "environment", body: `{"command":["sh","-c","echo $HARNESS_ONLY $ADDED; env | grep -c '^BRIDGE_' || true"],"env":{"ADDED":"too"}}`,
			stdout: "yes too\n0\n"}, // BRIDGE_EXEC_TEST_SECRET is the bridge's own
		{name: "stdin", body: `{"command":["cat"],"stdin":"aGVsbG8="}`, stdout: "hello"},
		{name: "dir", body: `{"command":["pwd"],"dir":"/tmp"}`, stdout: "/tmp\n"},
		{name: "timeout ends the group", body: `{"command":["sh","-c","sleep 30 & echo $! > ` + childPid + `; sleep 30"],"timeoutMs":300}`, exit: 137,
			check: func(t *testing.T, res wire.ExecResult) {
				if !res.TimedOut || res.DurationMS > 5000 {
					t.Errorf("timedOut %v after %d ms, want true within 5 s", res.TimedOut, res.DurationMS)
				}
				raw, err := os.ReadFile(childPid)
				pid, perr := strconv.Atoi(strings.TrimSpace(string(raw)))
				if err != nil || perr != nil {
					t.Fatalf("the background child's pid: %q, %v %v", raw, err, perr)
				}
				// Killed with the group: gone once reaped by init, or a
				// zombie at most.
				polltest.Until(t, 5*time.Second, "the background child ended", func() bool {
					st, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
					return err != nil || strings.Contains(string(st), ") Z ")
				})
			}},
		{name: "output bound", body: `{"command":["head","-c","3000000","/dev/zero"]}`,
			check: func(t *testing.T, res wire.ExecResult) {
				if !res.Truncated || len(res.Stdout) != wire.ExecOutputLimit {
					t.Errorf("truncated %v with %d bytes, want true with %d", res.Truncated, len(res.Stdout), wire.ExecOutputLimit)
				}
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			start := time.Now()
			status, res, e := post(t, tc.body)
			if status != http.StatusOK {
				t.Fatalf("status %d (%+v), want 200", status, e)
			}
			if res.ExitCode != tc.exit || (tc.check == nil && (string(res.Stdout) != tc.stdout || string(res.Stderr) != tc.stderr)) {
				t.Errorf("exit %d, stdout %q, stderr %q; want %d, %q, %q", res.ExitCode, res.Stdout, res.Stderr, tc.exit, tc.stdout, tc.stderr)
			}
			if tc.check != nil {
				tc.check(t, res)
			}
			t.Logf("took %v", time.Since(start).Round(time.Millisecond))
		})
	}
	for _, tc := range []struct{ name, body, want string }{
		{"no command", `{"command":[]}`, "command"},
		{"relative dir", `{"command":["pwd"],"dir":"tmp"}`, "absolute"},
		{"bad env name", `{"command":["true"],"env":{"A=B":"x"}}`, "env"},
		{"timeout too long", `{"command":["true"],"timeoutMs":6000000}`, "timeoutMs"},
		{"unknown program", `{"command":["no-such-program-here"]}`, "no-such-program-here"},
		{"unknown path", `{"command":["/no/such/program"]}`, "/no/such/program"},
		{"no such dir", `{"command":["pwd"],"dir":"/no/such/dir"}`, "/no/such/dir"},
		{"unknown field", `{"command":["true"],"shell":true}`, "shell"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			status, _, e := post(t, tc.body)
			if status != http.StatusBadRequest || e.Error.Type != wire.TypeInvalidRequest || !strings.Contains(e.Error.Message, tc.want) {
				t.Errorf("status %d, %+v; want 400 %s naming %q", status, e.Error, wire.TypeInvalidRequest, tc.want)
			}
		})
	}
	resp := v.do(t, "POST", "/v1/exec", `{"command":["true"]}`, "Authorization", "")
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("without the bearer: %d, want 401", resp.StatusCode)
	}
}
