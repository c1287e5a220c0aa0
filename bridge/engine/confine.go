package engine

import (
	"context"
	"errors"
	"time"

	"github.com/tangle-network/boxctl/bridge/harness"
	"github.com/tangle-network/boxctl/bridge/jail"
	"github.com/tangle-network/boxctl/bridge/wire"
)

// CheckExecution reports whether the confinement r can be enforced now for
// a turn in cwd: it probes the jail again (package jail, Jailer.Check). The
// server calls it before it admits a jailed turn, so that a jail this host
// cannot enforce is refused rather than run unconfined.
func (e *Engine) CheckExecution(ctx context.Context, r jail.Request, cwd string) error {
	return e.jail.Check(ctx, r, cwd)
}

// ExecutionCaps is the execution part of the bridge's capabilities, from
// the jail's last probe; it waits for the first (or ctx).
func (e *Engine) ExecutionCaps(ctx context.Context) wire.ExecutionCaps {
	select {
	case <-e.probed:
	case <-ctx.Done():
	}
	return e.jail.Caps()
}

// ExactAvailable reports whether exact process environments, which run
// with a network namespace of their own, can run on this host, from the
// jail's last probe; it waits for the first (or ctx).
func (e *Engine) ExactAvailable(ctx context.Context) bool {
	select {
	case <-e.probed:
	case <-ctx.Done():
	}
	return e.jail.Isolated() == nil
}

// JailErrorType is the wire error type of a jail error: a confinement the
// host cannot enforce, a network jail that cannot be put in force, or a
// request that cannot mean anything.
func JailErrorType(err error) string {
	var (
		un  *jail.UnavailableError
		ne  *jail.NetError
		req *jail.RequestError
	)
	switch {
	case errors.As(err, &un):
		return wire.TypeNotConfigured
	case errors.As(err, &ne):
		return wire.TypeExecutorMisconfigured
	case errors.As(err, &req):
		return wire.TypeInvalidRequest
	}
	return wire.TypeHarnessUnavailable
}

// confine prepares the confinement of a turn, its request raised to the
// operator's floor, and applies it to t: the jail's environment under the
// adapter's own settings, and the model endpoint as the jail serves it.
// It returns nil for a turn without confinement.
func (e *Engine) confine(r jail.Request, t *harness.Turn) (*jail.Prepared, error) {
	if r = e.jail.Resolve(r); !r.Active() {
		return nil, nil
	}
	p, err := e.jail.Prepare(r, t.Cwd, t.StateDir)
	if err != nil {
		return nil, err
	}
	if len(p.Env) > 0 {
		env := make(map[string]string, len(t.Env)+len(p.Env))
		for k, v := range t.Env {
			env[k] = v
		}
		for k, v := range p.Env {
			env[k] = v
		}
		t.Env = env
	}
	t.RouterURL = p.RouterURL
	return p, nil
}

// spawnJailed starts spec, confined by p when it is not nil; what the jail
// holds outside the process is released once the process has exited.
func (e *Engine) spawnJailed(harnessName string, spec harness.Command, marker string, p *jail.Prepared) (*process, error) {
	if p == nil {
		return e.spawn(harnessName, spec, marker)
	}
	wrapped, cleanup, err := p.Wrap(spec)
	if err != nil {
		return nil, err
	}
	proc, err := e.spawn(harnessName, wrapped, marker)
	if err != nil {
		cleanup()
		return nil, err
	}
	go func() {
		<-proc.exited
		cleanup()
	}()
	return proc, nil
}

// turnTimeout is the deadline of a turn: its execution.timeoutMs when
// given (the caller's value wins over the backend's), else the backend's.
func turnTimeout(asked, backend time.Duration) time.Duration {
	if asked > 0 {
		return asked
	}
	return backend
}
