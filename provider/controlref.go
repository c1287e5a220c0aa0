package provider

import (
	"fmt"
	"regexp"

	"github.com/tangle-network/boxctl/bridge/wire"
)

// ControlRef names one run exactly: enough to re-attach to it, replay it,
// read its result and cancel it from another process. Its JSON form is the
// protocol's (runId, provider, environmentId, sessionId, executionId,
// requestDigest) and round-trips exactly. Field order matches wire.RunRef so
// the two convert.
type ControlRef struct {
	RunID         string `json:"runId"`
	Provider      string `json:"provider"`
	EnvironmentID string `json:"environmentId"`
	SessionID     string `json:"sessionId"`
	ExecutionID   string `json:"executionId"`
	RequestDigest string `json:"requestDigest"`
}

var digestPattern = regexp.MustCompile(`^sha256:[0-9a-f]{64}$`)

// Validate checks that every coordinate is present and well formed.
func (c ControlRef) Validate() error {
	if err := wire.ValidRunID(c.RunID); err != nil {
		return fmt.Errorf("control reference run id: %w", err)
	}
	for _, f := range []struct{ name, v string }{
		{"provider", c.Provider}, {"environment id", c.EnvironmentID},
		{"session id", c.SessionID}, {"execution id", c.ExecutionID},
	} {
		if err := wire.ValidIdentifier(f.v); err != nil {
			return fmt.Errorf("control reference %s %w", f.name, err)
		}
	}
	if !digestPattern.MatchString(c.RequestDigest) {
		return fmt.Errorf("control reference request digest must be sha256:<64 hex>")
	}
	return nil
}

func (c ControlRef) wire() wire.RunRef { return wire.RunRef(c) }
