package sandbox_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tangle-network/boxctl/internal/boxtest"
	"github.com/tangle-network/boxctl/pins"
	"github.com/tangle-network/boxctl/provider"
	"github.com/tangle-network/boxctl/provider/sandbox"
	"github.com/tangle-network/boxctl/vendors"
	"github.com/tangle-network/boxctl/vendors/egress"
)

// failingDestroy wraps a vendor so that destroying its boxes fails.
type failingDestroy struct{ vendors.Vendor }

func (v failingDestroy) Create(ctx context.Context, s vendors.CreateSpec) (vendors.Box, error) {
	b, err := v.Vendor.Create(ctx, s)
	if b != nil {
		b = failingBox{b}
	}
	return b, err
}

type failingBox struct{ vendors.Box }

func (failingBox) Destroy(context.Context) error { return errors.New("the vendor refused the destroy") }

// TestProvider_CreateFaults checks each failure after the box exists: the
// typed error, and no box left behind but the one a cleanup handle names.
func TestProvider_CreateFaults(t *testing.T) {
	t.Parallel()
	f := setup(t)
	badBridge := boxtest.Image(t, boxtest.Options{Bridge: []byte("#!/bin/sh\necho 'box-bridge: broken build' >&2\nexit 3\n")})
	mismatch := boxtest.Pins(t).Clone()
	for i := range mismatch.Harnesses {
		if h := &mismatch.Harnesses[i]; h.Name == "claude-code" {
			h.Version, h.VersionPattern = "9.9.9", `^9\.9\.9 \(Claude Code\)$`
		}
	}
	cases := []struct {
		name  string
		opts  func(*sandbox.Options)
		req   sandbox.CreateRequest
		check func(t *testing.T, err error)
	}{
		{"bridge fails to start", func(o *sandbox.Options) { o.Image = badBridge }, sandbox.CreateRequest{Profile: claude},
			func(t *testing.T, err error) {
				var be *sandbox.BridgeExitError
				if !errors.As(err, &be) || be.ExitCode != 3 || !strings.Contains(be.Log, "broken build") {
					t.Errorf("Create = %v, want a *BridgeExitError with status 3 and the bridge's message", err)
				}
			}},
		{"backend never ready", func(o *sandbox.Options) {
			o.BridgeEnv = map[string]string{"CLAUDE_BIN": "/bin/false"}
			o.ReadyTimeout = 5 * time.Second
		}, sandbox.CreateRequest{Profile: claude},
			func(t *testing.T, err error) {
				var nr *sandbox.NotReadyError
				if !errors.As(err, &nr) || nr.Backend != "claude-code" || nr.Timeout != 5*time.Second {
					t.Errorf("Create = %v, want a *NotReadyError for claude-code after 5s", err)
				}
			}},
		{"pin mismatch", func(o *sandbox.Options) { o.Pins = mismatch }, sandbox.CreateRequest{Profile: claude},
			func(t *testing.T, err error) {
				var pm *sandbox.PinMismatchError
				if !errors.As(err, &pm) || pm.Pinned != "9.9.9" || !strings.Contains(pm.Reported, "2.1.") {
					t.Errorf("Create = %v, want a *PinMismatchError naming 9.9.9 and the box's version", err)
				}
				if err != nil && !strings.Contains(err.Error(), "9.9.9") {
					t.Errorf("error %q does not name the pin", err)
				}
			}},
		{"clone fails", nil, sandbox.CreateRequest{Profile: claude,
			Workspace: &sandbox.WorkspaceRepo{RepoURL: "http://agent:s3cr3t-token@127.0.0.1:9/nope.git"}},
			func(t *testing.T, err error) {
				var ce *sandbox.CloneError
				if !errors.As(err, &ce) || ce.Repo != "http://127.0.0.1:9/nope.git" || ce.Message == "" {
					t.Errorf("Create = %v, want a *CloneError naming the repo and git's message", err)
				}
				if err != nil && strings.Contains(err.Error(), "s3cr3t") {
					t.Errorf("error %q shows the URL's credential", err)
				}
			}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			p := f.Provider(t, tc.opts)
			env, err := p.Create(t.Context(), tc.req)
			if env != nil {
				_ = env.Destroy(context.WithoutCancel(t.Context()))
				t.Fatal("Create succeeded")
			}
			tc.check(t, err)
			var ce *vendors.CleanupError
			if errors.As(err, &ce) {
				t.Errorf("Create = %v, want the box destroyed, not a cleanup handle", err)
			}
		})
	}

	t.Run("destroy fails", func(t *testing.T) {
		t.Parallel()
		p := f.Provider(t, func(o *sandbox.Options) {
			o.Vendor = failingDestroy{f.Vendor}
			o.Pins = mismatch
		})
		_, err := p.Create(t.Context(), sandbox.CreateRequest{Profile: claude})
		var ce *vendors.CleanupError
		if !errors.As(err, &ce) || ce.BoxID == "" {
			t.Fatalf("Create = %v, want a *vendors.CleanupError with the box id", err)
		}
		var pm *sandbox.PinMismatchError
		if !errors.As(err, &pm) {
			t.Errorf("the cleanup error %v lost the original failure", err)
		}
		box, err := f.Vendor.Connect(t.Context(), ce.BoxID)
		if err != nil {
			t.Fatalf("the cleanup handle %s names no box: %v", ce.BoxID, err)
		}
		if err := box.Destroy(t.Context()); err != nil {
			t.Fatal(err)
		}
	})
}

// TestProvider_CloneWorkspace serves a repository over git's dumb HTTP
// protocol on the boxes' network and checks it out at a tag.
func TestProvider_CloneWorkspace(t *testing.T) {
	t.Parallel()
	f := setup(t)
	repo := filepath.Join(t.TempDir(), "repo")
	for _, args := range [][]string{
		{"init", "-q", "-b", "main", repo},
		{"-C", repo, "-c", "user.name=t", "-c", "user.email=t@example.invalid", "commit", "-q", "--allow-empty", "-m", "one"},
		{"-C", repo, "tag", "v1"},
		{"-C", repo, "-c", "user.name=t", "-c", "user.email=t@example.invalid", "commit", "-q", "--allow-empty", "-m", "two"},
		{"-C", repo, "update-server-info"},
	} {
		if out, err := exec.Command("git", args...).CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v %s", args, err, out)
		}
	}
	host, err := f.Vendor.HostAddress(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.FileServer(http.Dir(filepath.Join(repo, ".git")))}
	go func() { _ = srv.Serve(l) }()
	t.Cleanup(func() { srv.Close() })

	p := f.Provider(t, nil)
	env := create(t, p, sandbox.CreateRequest{Profile: claude,
		Workspace: &sandbox.WorkspaceRepo{RepoURL: fmt.Sprintf("http://%s/", l.Addr()), GitRef: "v1"}})
	res, err := env.Box().Exec(t.Context(), vendors.ExecSpec{Command: []string{"git", "log", "--format=%s"}, Dir: sandbox.Workspace})
	if err != nil || res.ExitCode != 0 || strings.TrimSpace(string(res.Stdout)) != "one" {
		t.Errorf("git log in the workspace = %q %q %v, want the tagged commit only", res.Stdout, res.Stderr, err)
	}
}

// TestProvider_Refusals checks what Create refuses before any vendor call.
func TestProvider_Refusals(t *testing.T) {
	v := &countingVendor{}
	good := sandbox.Options{Vendor: v, Image: "img", Router: sandbox.Router{URL: "http://127.0.0.1:1", Key: "k"}}
	if _, err := sandbox.New(sandbox.Options{Vendor: v, Image: "img", Router: sandbox.Router{URL: "http://u:p@127.0.0.1:1", Key: "k"}}); err == nil {
		t.Error("New accepted a router URL with credentials")
	}
	if _, err := sandbox.New(sandbox.Options{Vendor: v, Image: "img", Router: sandbox.Router{URL: "http://127.0.0.1:1"}}); err == nil {
		t.Error("New accepted no router key")
	}
	if _, err := sandbox.New(sandbox.Options{Vendor: v, Image: "img", Router: good.Router, BridgeEnv: map[string]string{"BRIDGE_BEARER": "x"}}); err == nil {
		t.Error("New let BridgeEnv set the bearer")
	}
	if _, err := sandbox.New(sandbox.Options{Vendor: v, Image: "img", Router: good.Router, Egress: &egress.Policy{}}); !errors.Is(err, sandbox.ErrNoEgressGate) {
		t.Errorf("New(deny-all, no gate) = %v, want ErrNoEgressGate", err)
	}
	if _, err := sandbox.New(sandbox.Options{Vendor: v, Image: "img", Router: good.Router,
		Egress: &egress.Policy{Open: true, Allow: []egress.Rule{{Domain: "example.com"}}}}); !errors.Is(err, egress.ErrOpenWithRules) {
		t.Errorf("New(open with rules) = %v, want ErrOpenWithRules", err)
	}
	cases := []struct {
		name string
		opts func(*sandbox.Options)
		req  sandbox.CreateRequest
		want func(error) bool
	}{
		{"unsupported field", func(o *sandbox.Options) { o.Resources.MemoryBytes = 1 << 30 }, sandbox.CreateRequest{Profile: claude},
			func(err error) bool {
				var u *vendors.UnsupportedError
				return errors.As(err, &u) && u.Field == vendors.FieldMemory
			}},
		{"egress on a vendor that does not enforce it", func(o *sandbox.Options) {
			o.Egress, o.EgressGate = &egress.Policy{}, noGate{}
		}, sandbox.CreateRequest{Profile: claude},
			func(err error) bool {
				var u *vendors.UnsupportedError
				return errors.As(err, &u) && u.Field == vendors.FieldEgress
			}},
		{"unknown harness", nil, sandbox.CreateRequest{Profile: provider.Profile{Harness: "no-such-cli"}},
			func(err error) bool { return errors.Is(err, pins.ErrUnknownHarness) }},
		{"no harness", nil, sandbox.CreateRequest{}, func(err error) bool { return err != nil }},
		{"lifetime over the maximum", nil, sandbox.CreateRequest{Profile: claude, Lifetime: 30 * 24 * time.Hour},
			func(err error) bool {
				var s *vendors.SpecError
				return errors.As(err, &s)
			}},
		{"option injection in the repo", nil, sandbox.CreateRequest{Profile: claude, Workspace: &sandbox.WorkspaceRepo{RepoURL: "--upload-pack=x"}},
			func(err error) bool { return err != nil }},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			o := good
			if tc.opts != nil {
				tc.opts(&o)
			}
			p, err := sandbox.New(o)
			if err != nil {
				t.Fatal(err)
			}
			v.calls = 0
			_, err = p.Create(t.Context(), tc.req)
			if !tc.want(err) {
				t.Errorf("Create = %v, want the typed refusal", err)
			}
			if v.calls != 0 {
				t.Errorf("the vendor was called %d times", v.calls)
			}
		})
	}
}

// noGate is an egress gate that is never reached.
type noGate struct{}

func (noGate) Set(context.Context, netip.Addr, egress.Policy) error {
	return errors.New("unexpected set")
}
func (noGate) Remove(context.Context, netip.Addr) error { return errors.New("unexpected remove") }

// countingVendor honours no optional field and counts calls.
type countingVendor struct{ calls int }

func (v *countingVendor) Name() string { return "counting" }
func (v *countingVendor) Supports() vendors.Fields {
	return vendors.NewFields(vendors.FieldPorts, vendors.FieldOwner)
}
func (v *countingVendor) Create(context.Context, vendors.CreateSpec) (vendors.Box, error) {
	v.calls++
	return nil, errors.New("unexpected create")
}
func (v *countingVendor) Connect(context.Context, string) (vendors.Box, error) {
	v.calls++
	return nil, os.ErrNotExist
}
func (v *countingVendor) List(context.Context, map[string]string) ([]vendors.Info, error) {
	v.calls++
	return nil, nil
}
