package server

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"github.com/tangle-network/boxctl/bridge/engine"
	"github.com/tangle-network/boxctl/bridge/jail"
	"github.com/tangle-network/boxctl/bridge/wire"
)

// Refusals of an execution the bridge does not run, worded as the
// TypeScript bridge words them where it has the same refusal.
const (
	msgRetainedSandbox = "retained native sessions cannot execute in a sandbox; use /v1/chat/completions for sandbox execution"
	msgNetJailSandbox  = "net-jail was requested but execution.kind=sandbox runs the harness in a sandbox, which this bridge does not " +
		"configure the network policy for. Use the sandbox EgressPolicy for that mode, or send execution.kind=host, which this " +
		"bridge net-jails itself."
	msgSandbox = "this bridge runs inside a box and cannot provision a sandbox for execution.kind=sandbox; send execution.kind=host " +
		"(with jail {mode: write-jail|fs-jail} and netJail {mode: net-jail} for confinement) to run the harness here, confined, " +
		"or create a box of its own for the work with the sandbox provider"
)

// execution is a decoded execution object and what it asks of the engine.
type execution struct {
	ex      *wire.Execution // nil: none
	confine jail.Request
	timeout time.Duration
}

// parseExecution decodes an execution object (400 on a malformed one).
func parseExecution(raw json.RawMessage) (execution, *wire.ErrorBody) {
	ex, err := wire.ParseExecution(raw)
	if err != nil {
		return execution{}, &wire.ErrorBody{Type: wire.TypeInvalidRequest, Message: err.Error()}
	}
	x := execution{ex: ex, confine: jail.FromWire(ex)}
	if ex != nil && ex.TimeoutMS != nil {
		x.timeout = time.Duration(*ex.TimeoutMS) * time.Millisecond
	}
	return x, nil
}

// sandbox reports whether the execution asks for a sandbox.
func (x execution) sandbox() bool { return x.ex != nil && x.ex.Kind == wire.ExecutionSandbox }

// admitChat decides whether a chat turn's execution runs here, in the
// TypeScript bridge's order: a network jail with kind sandbox is refused
// first, then a sandbox this bridge cannot provision, then a jail the host
// cannot enforce now (probed again) for a turn in cwd.
func (s *Server) admitChat(ctx context.Context, x execution, cwd string) *wire.ErrorBody {
	switch {
	case x.sandbox() && x.ex.NetJailed():
		return &wire.ErrorBody{Type: wire.TypeExecutorMisconfigured, Message: msgNetJailSandbox}
	case x.sandbox():
		return &wire.ErrorBody{Type: wire.TypeSandboxUnsupported, Message: msgSandbox}
	}
	return s.checkJail(ctx, x, cwd)
}

// admitSession decides whether a retained session (at its creation, and at
// each turn) may run with its execution: never in a sandbox, and only with
// a jail the host can enforce now.
func (s *Server) admitSession(ctx context.Context, x execution, cwd string) *wire.ErrorBody {
	if x.sandbox() {
		return &wire.ErrorBody{Type: wire.TypeCapabilityDenied, Message: msgRetainedSandbox}
	}
	return s.checkJail(ctx, x, cwd)
}

func (s *Server) checkJail(ctx context.Context, x execution, cwd string) *wire.ErrorBody {
	err := s.opts.Engine.CheckExecution(ctx, x.confine, cwd)
	if err == nil {
		return nil
	}
	e := &wire.ErrorBody{Type: engine.JailErrorType(err), Message: err.Error()}
	var un *jail.UnavailableError
	if errors.As(err, &un) {
		e.Code = un.Reason
		e.Message = "the turn must run in a jail (asked by its execution or the operator's floor) that this host cannot enforce, " +
			"and the bridge refuses to run it unconfined: " + un.Detail
	}
	return e
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}
