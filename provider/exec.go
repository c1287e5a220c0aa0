package provider

import (
	"context"
	"encoding/json"
	"net/http"

	"github.com/tangle-network/boxctl/bridge/wire"
)

// maxExecBytes bounds an exec answer: both outputs at their limit,
// base64-encoded, and the rest of the document.
const maxExecBytes = 4*wire.ExecOutputLimit + 64<<10

// Exec runs a command to its end in the bridge's box (POST /v1/exec), as
// the user the harnesses run as, from their environment, and returns its
// status and output. Cancelling ctx ends the command's whole process
// group. A request the bridge refuses is a *BridgeError of type
// invalid_request_error.
func (p *Provider) Exec(ctx context.Context, req wire.ExecRequest) (wire.ExecResult, error) {
	const op = "exec"
	_, _, data, err := p.c.call(ctx, op, http.MethodPost, "/v1/exec", req, maxExecBytes, func(s int) bool { return s == http.StatusOK })
	if err != nil {
		return wire.ExecResult{}, err
	}
	var res wire.ExecResult
	if err := json.Unmarshal(data, &res); err != nil {
		return wire.ExecResult{}, &ProtocolError{Op: op, Reason: "invalid answer: " + err.Error()}
	}
	return res, nil
}
