package server

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/tangle-network/boxctl/bridge/engine"
	"github.com/tangle-network/boxctl/bridge/jail"
	"github.com/tangle-network/boxctl/bridge/wire"
)

// TestExecution_Floor holds the operator's jail floor (BRIDGE_JAIL_MODE,
// BRIDGE_NET_JAIL_MODE) to the TypeScript bridge's rule: every turn runs
// at least as confined as the floor, whatever its execution asks; a
// request may raise it; and a floor the host cannot enforce refuses the
// turn (501), never runs it unconfined.
func TestExecution_Floor(t *testing.T) {
	project, outside := t.TempDir(), t.TempDir()
	secret := filepath.Join(outside, "secret")
	if err := os.WriteFile(secret, []byte("host secret\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	writeFloor := newEnv(t, config{engine: engine.Options{JailFloor: jail.Floor{Mode: wire.JailWrite}}})
	fsFloor := newEnv(t, config{engine: engine.Options{JailFloor: jail.Floor{Mode: wire.JailFS}}})
	for i, tc := range []struct {
		name      string
		v         *env
		execution string // "" for none
		prompt    string
		want      string // prefix of the harness's answer
	}{
		{"no execution under a write-jail floor cannot write outside", writeFloor, "", "write:" + filepath.Join(outside, "a"), "fail: "},
		{"jail off under a write-jail floor cannot write outside", writeFloor, `{"kind":"host","jail":{"mode":"off"}}`,
			"write:" + filepath.Join(outside, "b"), "fail: "},
		{"the project stays writable", writeFloor, "", "write:" + filepath.Join(project, "made"), "ok"},
		{"a write-jail floor leaves reads open", writeFloor, "", "read:" + secret, "ok"},
		{"fs-jail raises a write-jail floor", writeFloor, `{"kind":"host","jail":{"mode":"fs-jail"}}`, "read:" + secret, "fail: "},
		{"write-jail under an fs-jail floor cannot read the host", fsFloor, `{"kind":"host","jail":{"mode":"write-jail"}}`,
			"read:" + secret, "fail: "},
		{"no execution under an fs-jail floor cannot read the host", fsFloor, "", "read:" + secret, "fail: "},
	} {
		t.Run(tc.name, func(t *testing.T) {
			extra := []string{fmt.Sprintf(`"cwd":%q`, project)}
			if tc.execution != "" {
				extra = append(extra, `"execution":`+tc.execution)
			}
			resp := tc.v.do(t, "POST", "/v1/chat/completions", chatBody("floor-"+strconv.Itoa(i), tc.prompt, false, extra...))
			c := decode[wire.Completion](t, resp)
			if resp.StatusCode != 200 || c.Error != nil || len(c.Choices) == 0 || !strings.HasPrefix(c.Choices[0].Message.Content, tc.want) {
				t.Fatalf("POST %q with execution %q = %d %+v, want %q...", tc.prompt, tc.execution, resp.StatusCode, c, tc.want)
			}
		})
	}
	for _, name := range []string{"a", "b"} {
		if _, err := os.Stat(filepath.Join(outside, name)); !os.IsNotExist(err) {
			t.Errorf("a write outside the project under the floor reached the host (%s: %v)", name, err)
		}
	}

	t.Run("a retained session's turns run at the floor", func(t *testing.T) {
		createSession(t, fsFloor, "s1", fmt.Sprintf(`,"cwd":%q`, project))
		postTurn(t, fsFloor, "s1", turnBody("t1", "r1", "read:"+secret))
		if got := frameText(openEvents(t, fsFloor, "/v1/runs/r1/events", "").until(isTerminal)); !strings.HasPrefix(got, "fail: ") {
			t.Errorf("retained turn under an fs-jail floor read the host: %q", got)
		}
	})

	t.Run("a floor the host cannot enforce refuses every turn", func(t *testing.T) {
		for _, tc := range []struct {
			name  string
			floor jail.Floor
			typ   string
		}{
			{"fs-jail without bwrap", jail.Floor{Mode: wire.JailFS}, wire.TypeNotConfigured},
			{"net-jail without bwrap", jail.Floor{Net: true}, wire.TypeNotConfigured},
		} {
			v := newEnv(t, config{engine: engine.Options{JailFloor: tc.floor, Bwrap: "/nonexistent/bwrap",
				RouterURL: "https://router.example.com/v1"}})
			resp := v.do(t, "POST", "/v1/chat/completions", chatBody("unenforced", "hello", false, fmt.Sprintf(`"cwd":%q`, project)))
			e := decode[wire.ErrorResponse](t, resp).Error
			if resp.StatusCode != 501 || e.Type != tc.typ || e.Code != jail.ReasonBwrapMissing {
				t.Errorf("%s: POST without execution = %d %+v, want 501 %s", tc.name, resp.StatusCode, e, tc.typ)
			}
			if resp := v.do(t, "GET", "/v1/runs/unenforced", ""); resp.StatusCode != 404 {
				t.Errorf("%s: GET the refused run = %d, want 404", tc.name, resp.StatusCode)
			}
		}
		noRouter := newEnv(t, config{engine: engine.Options{JailFloor: jail.Floor{Net: true}}})
		resp := noRouter.do(t, "POST", "/v1/chat/completions", chatBody("no-router", "hello", false, fmt.Sprintf(`"cwd":%q`, project)))
		if e := decode[wire.ErrorResponse](t, resp).Error; resp.StatusCode != 501 || e.Type != wire.TypeExecutorMisconfigured {
			t.Errorf("net-jail floor without a model endpoint = %d %+v, want 501 %s", resp.StatusCode, e, wire.TypeExecutorMisconfigured)
		}
	})

	t.Run("GET / reports the floor", func(t *testing.T) {
		both := newEnv(t, config{engine: engine.Options{JailFloor: jail.Floor{Mode: wire.JailFS, Net: true},
			RouterURL: "https://router.example.com/v1"}})
		for _, tc := range []struct {
			v       *env
			fs, net string
		}{{writeFloor, wire.JailWrite, wire.NetJailOff}, {both, wire.JailFS, wire.NetJailOn}} {
			var root struct {
				Capabilities struct {
					Execution wire.ExecutionCaps `json:"execution"`
				} `json:"capabilities"`
			}
			if err := json.NewDecoder(tc.v.do(t, "GET", "/", "").Body).Decode(&root); err != nil {
				t.Fatal(err)
			}
			if x := root.Capabilities.Execution; x.Jail.Floor != tc.fs || x.NetJail.Floor != tc.net {
				t.Errorf("GET / capabilities.execution = jail %+v net %+v, want floors %s, %s", x.Jail, x.NetJail, tc.fs, tc.net)
			}
		}
	})
}
