package sandbox_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/tangle-network/boxctl/bridge/wire"
	"github.com/tangle-network/boxctl/internal/polltest"
	"github.com/tangle-network/boxctl/provider/sandbox"
	"github.com/tangle-network/boxctl/vendors"
)

// TestEnvironment_Exec runs commands through the box's bridge on every
// target: output and status as the vendor's own exec gives them, the
// harnesses' environment (no variable of the bridge's own, not the
// bearer), stdin, output over the route's bound (ErrExecTruncated, or the
// vendor's exec for a spec that asks for more), a call past its deadline
// (ErrExecTimedOut), and a cancelled call that ends the command.
func TestEnvironment_Exec(t *testing.T) {
	t.Parallel()
	f := setup(t)
	for _, tg := range f.Targets(t) {
		t.Run(tg.Name, func(t *testing.T) {
			p := f.On(t, tg, nil)
			env := create(t, p, sandbox.CreateRequest{Profile: claude})
			via, err := env.Exec(t.Context(), vendors.ExecSpec{Command: []string{"sh", "-c", "id -u; echo err >&2; exit 4"}})
			if err != nil {
				t.Fatal(err)
			}
			direct, err := env.Box().Exec(t.Context(), vendors.ExecSpec{Command: []string{"id", "-u"}})
			if err != nil {
				t.Fatal(err)
			}
			if via.ExitCode != 4 || string(via.Stdout) != string(direct.Stdout) || string(via.Stderr) != "err\n" {
				t.Errorf("through the bridge: exit %d, %q, %q; want 4, the vendor exec's user %q, \"err\\n\"", via.ExitCode, via.Stdout, via.Stderr, direct.Stdout)
			}
			res, err := env.Exec(t.Context(), vendors.ExecSpec{Command: []string{"sh", "-c", "env; cat"}, Env: map[string]string{"ADDED": "yes"},
				Stdin: strings.NewReader("from-stdin")})
			if err != nil {
				t.Fatal(err)
			}
			out := string(res.Stdout)
			if !strings.Contains(out, "ADDED=yes") || !strings.HasSuffix(out, "from-stdin") {
				t.Errorf("env and stdin: %q", out)
			}
			for _, bad := range []string{"BRIDGE_", "TANGLE_", env.Reference().Bearer} {
				if bad != "" && strings.Contains(out, bad) {
					t.Errorf("the command's environment holds %q", bad[:min(len(bad), 8)])
				}
			}
			big := vendors.ExecSpec{Command: []string{"head", "-c", "2000000", "/dev/zero"}}
			if res, err := env.Exec(t.Context(), big); !errors.Is(err, sandbox.ErrExecTruncated) || len(res.Stdout) != wire.ExecOutputLimit {
				t.Errorf("2 MB of output, default spec: %d bytes, %v; want the route's %d and ErrExecTruncated", len(res.Stdout), err, wire.ExecOutputLimit)
			}
			big.MaxOutput = 4 << 20
			if res, err := env.Exec(t.Context(), big); err != nil || len(res.Stdout) != 2000000 {
				t.Errorf("2 MB of output, MaxOutput 4 MiB: %d bytes, %v; want all of it (the vendor's exec)", len(res.Stdout), err)
			}
			dctx, dcancel := context.WithTimeout(t.Context(), 2*time.Second)
			_, err = env.Exec(dctx, vendors.ExecSpec{Command: []string{"sleep", "60"}})
			dcancel()
			if !errors.Is(err, sandbox.ErrExecTimedOut) {
				t.Errorf("a command past its call's deadline: %v, want ErrExecTimedOut", err)
			}
			ctx, cancel := context.WithCancel(t.Context())
			errC := make(chan error, 1)
			go func() {
				_, err := env.Exec(ctx, vendors.ExecSpec{Command: []string{"sh", "-c", "echo $$ > /tmp/exec-sleeper.tmp && mv /tmp/exec-sleeper.tmp /tmp/exec-sleeper; exec sleep 60"}})
				errC <- err
			}()
			polltest.Until(t, 30*time.Second, "the command to start", func() bool {
				return sh(t, env.Box(), "cat /tmp/exec-sleeper 2>/dev/null") != ""
			})
			cancel()
			select {
			case err := <-errC:
				if err == nil {
					t.Error("a cancelled exec returned no error")
				}
			case <-time.After(10 * time.Second):
				t.Fatal("the cancelled exec had not returned 10s later")
			}
			polltest.Until(t, 10*time.Second, "the command ended with its call", func() bool {
				return sh(t, env.Box(), "kill -0 $(cat /tmp/exec-sleeper) 2>/dev/null && echo live || echo gone") == "gone"
			})
		})
	}
}
