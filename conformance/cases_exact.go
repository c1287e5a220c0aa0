package conformance

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"

	"github.com/tangle-network/boxctl/bridge/wire"
	"github.com/tangle-network/boxctl/provider/sandbox"
)

// exactRoutesAnswer backs an exactProcess claim: in an exact environment
// of the box's bridge (egress blocked, the one mode a bridge claims), a
// process runs with exactly its launch's environment, its output is read
// back, and the environment is destroyed.
func exactRoutesAnswer(c *caseCtx, env *sandbox.Environment, caps *wire.ExactProcessCaps) error {
	r := c.step("exactProcess is claimed (%v)", caps.Egress)
	if !slices.Equal(caps.Egress, []string{wire.EgressBlocked}) {
		return failf(r, "egress [blocked], the one mode a bridge enforces", "%v", caps.Egress)
	}
	ep, err := env.Box().Endpoint(c.ctx, sandbox.BridgePort)
	if err != nil {
		return err
	}
	call := func(method, path string, body, out any) (int, error) {
		var rd io.Reader
		if body != nil {
			b, _ := json.Marshal(body)
			rd = bytes.NewReader(b)
		}
		hr, err := http.NewRequestWithContext(c.ctx, method, ep.URL+path, rd)
		if err != nil {
			return 0, err
		}
		hr.Header.Set("Authorization", "Bearer "+env.Reference().Bearer)
		hr.Header.Set("Content-Type", "application/json")
		resp, err := ep.Client().Do(hr)
		if err != nil {
			return 0, err
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		if err != nil {
			return resp.StatusCode, err
		}
		if s, ok := out.(*string); ok {
			*s = string(b)
			return resp.StatusCode, nil
		}
		return resp.StatusCode, json.Unmarshal(b, out)
	}
	create := wire.ExactEnvironmentRequest{IdempotencyKey: "conformance-exact", Image: wire.ExactImageBox,
		Egress: wire.ExactEgress{Mode: wire.EgressBlocked}, MaxLifetimeMS: 120_000,
		Resources: wire.ExactResources{CPU: 1, MemoryMB: 256, DiskMB: 64}, Metadata: map[string]json.RawMessage{}}
	var res wire.ExactEnvironmentResult
	if code, err := call("POST", "/v1/exact/environments", create, &res); err != nil || code/100 != 2 {
		return failf(r, "an exact environment", "%d %+v (%v)", code, res, err)
	}
	base := "/v1/exact/environments/" + res.Environment.ID
	var st wire.ExactProcessStatus
	launch := wire.ExactLaunch{Executable: "/usr/bin/env", Args: []string{}, Cwd: "/tmp",
		Env: map[string]string{"ONLY": "this"}}
	if code, err := call("POST", base+"/processes", launch, &st); err != nil || code != http.StatusCreated {
		return failf(r, "a started process", "%d %+v (%v)", code, st, err)
	}
	proc := fmt.Sprintf("%s/processes/%d", base, st.PID)
	if code, err := call("GET", proc+"?wait_ms=30000", nil, &st); err != nil || code != http.StatusOK || st.Running ||
		st.Termination == nil || st.Termination.Kind != wire.TerminationExit || st.ExitCode != 0 {
		return failf(r, "the process ended with exit 0", "%d %+v (%v)", code, st, err)
	}
	var out string
	if code, err := call("GET", proc+"/output?stream=stdout", nil, &out); err != nil || code != http.StatusOK ||
		out != "ONLY=this\n" {
		return failf(r, "stdout ONLY=this alone (the launch's environment)", "%d %q (%v)", code, out, err)
	}
	var gone wire.ExactDestroyResult
	if code, err := call("DELETE", base, nil, &gone); err != nil || code != http.StatusOK || gone.Status != "destroyed" {
		return failf(r, "the environment destroyed", "%d %+v (%v)", code, gone, err)
	}
	c.note("claim exactProcess: a process ran jailed with exactly its launch's environment, and its environment was destroyed")
	return nil
}
