package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/spf13/cobra"
	"github.com/tangle-network/boxctl/vendors"
	"github.com/tangle-network/boxctl/vendors/docker"
	"github.com/tangle-network/boxctl/vendors/egress"
	"github.com/tangle-network/boxctl/vendors/egress/firewall"
	"github.com/tangle-network/boxctl/vendors/egress/gate"
)

// parseCmd runs cmd with args through its runF, which stores what it
// got; it returns that and the command's error.
func parseCmd[T any](t *testing.T, newCmd func(*app, func(context.Context, T) error) *cobra.Command, args ...string) (T, bool, error) {
	t.Helper()
	var got T
	called := false
	var out, errOut bytes.Buffer
	a := newApp(&out, &errOut)
	root := newRootCmd(a)
	// Replace the registered command by one whose runF records.
	cmd := newCmd(a, func(_ context.Context, o T) error { got, called = o, true; return nil })
	for _, c := range root.Commands() {
		if c.Name() == cmd.Name() {
			root.RemoveCommand(c)
		}
	}
	root.AddCommand(cmd)
	root.SetArgs(args)
	err := root.ExecuteContext(t.Context())
	return got, called, err
}

func TestUpCmd_Flags(t *testing.T) {
	type want struct {
		image, harness, model, repo, gitRef, routerURL, routerKey, bridgeOTLP string
		lifetime                                                              time.Duration
		local, showBearer, timings                                            bool
	}
	tests := []struct {
		name    string
		env     map[string]string // the Router's and the providers' variables
		args    []string
		want    want
		wantErr string // with exit code 2
	}{
		{name: "router from the environment", env: map[string]string{routerURLEnv: "https://r.example", routerKeyVar: "k1"},
			want: want{harness: "claude-code", routerURL: "https://r.example", routerKey: "k1", lifetime: 30 * time.Minute}},
		{name: "router flag, key from the environment", env: map[string]string{routerKeyVar: "k2"},
			args: []string{"--router", "http://10.0.0.1:9", "--image", "img:1", "--model", "sonnet", "--lifetime", "1h",
				"--repo", "https://example.com/r.git", "--git-ref", "main", "--show-bearer"},
			want: want{image: "img:1", harness: "claude-code", model: "sonnet", repo: "https://example.com/r.git", gitRef: "main",
				routerURL: "http://10.0.0.1:9", routerKey: "k2", lifetime: time.Hour, showBearer: true}},
		{name: "local router needs no environment", args: []string{"--router", "local", "--harness", "pi"},
			want: want{harness: "pi", lifetime: 30 * time.Minute, local: true}},
		{name: "timings", args: []string{"--router", "local", "--timings"},
			want: want{harness: "claude-code", lifetime: 30 * time.Minute, local: true, timings: true}},
		{name: "bridge spans", args: []string{"--router", "local", "--bridge-otlp", "http://172.17.0.1:4318"},
			want: want{harness: "claude-code", lifetime: 30 * time.Minute, local: true, bridgeOTLP: "http://172.17.0.1:4318"}},
		{name: "bridge spans to no URL", args: []string{"--router", "local", "--bridge-otlp", "collector:4318"}, wantErr: "--bridge-otlp"},
		{name: "no router at all", wantErr: "no model Router: TANGLE_ROUTER_URL and TANGLE_API_KEY are not set; set both, or pass --router local"},
		{name: "no key", env: map[string]string{routerURLEnv: "https://r.example"},
			wantErr: "no model Router: TANGLE_API_KEY is not set; set it, or pass --router local"},
		{name: "no URL", env: map[string]string{routerKeyVar: "k"},
			wantErr: "no model Router: TANGLE_ROUTER_URL is not set; set it, or pass --router local"},
		{name: "router flag without key", args: []string{"--router", "https://r.example"},
			wantErr: "no key for the Router: --router URL takes it from TANGLE_API_KEY, which is not set"},
		{name: "router not a URL", env: map[string]string{routerKeyVar: "k"}, args: []string{"--router", "r.example"},
			wantErr: `Router URL "r.example": want an absolute http or https URL`},
		{name: "router URL with credentials", env: map[string]string{routerKeyVar: "k"}, args: []string{"--router", "https://u:p@r.example"},
			wantErr: "must not carry credentials"},
		{name: "zero lifetime", args: []string{"--router", "local", "--lifetime", "0s"}, wantErr: "every box ends"},
		{name: "long lifetime", args: []string{"--router", "local", "--lifetime", "200h"}, wantErr: "the longest is"},
		{name: "git ref alone", args: []string{"--router", "local", "--git-ref", "main"}, wantErr: "--git-ref goes with --repo"},
		{name: "repo like a flag", args: []string{"--router", "local", "--repo", "--upload-pack=x"}, wantErr: "must not start with '-'"},
		{name: "unknown harness", args: []string{"--router", "local", "--harness", "nope"}, wantErr: `--harness "nope": known harnesses are`},
		{name: "unknown target", args: []string{"--router", "local", "--target", "k8s"}, wantErr: `--target "k8s"`},
		{name: "arguments", args: []string{"--router", "local", "extra"}, wantErr: "unknown command"},
		{name: "router key is no flag", args: []string{"--router-key", "k"}, wantErr: "unknown flag"},
		{name: "only an Anthropic key: Claude Code's provider", env: map[string]string{"ANTHROPIC_API_KEY": "ak"},
			want: want{harness: "claude-code", routerURL: "https://api.anthropic.com", routerKey: "ak", lifetime: 30 * time.Minute}},
		{name: "Codex takes its own provider of several", env: map[string]string{"ANTHROPIC_API_KEY": "ak", "OPENAI_API_KEY": "ok"},
			args: []string{"--harness", "codex"}, want: want{harness: "codex", routerURL: "https://api.openai.com", routerKey: "ok", lifetime: 30 * time.Minute}},
		{name: "Pi with its one key", env: map[string]string{"GEMINI_API_KEY": "gk"}, args: []string{"--harness", "pi"},
			want: want{harness: "pi", routerURL: "https://generativelanguage.googleapis.com", routerKey: "gk", lifetime: 30 * time.Minute}},
		{name: "Pi with several keys", env: map[string]string{"GEMINI_API_KEY": "gk", "OPENAI_API_KEY": "ok"}, args: []string{"--harness", "pi"},
			wantErr: "pass --upstream"},
		{name: "a provider at another URL", env: map[string]string{"ANTHROPIC_API_KEY": "ak", routerURLEnv: "https://r.example", routerKeyVar: "k"},
			args: []string{"--upstream", "anthropic", "--upstream-url", "http://127.0.0.1:9"},
			want: want{harness: "claude-code", routerURL: "http://127.0.0.1:9", routerKey: "ak", lifetime: 30 * time.Minute}},
		{name: "a provider without its key", args: []string{"--upstream", "gemini"}, wantErr: "$GEMINI_API_KEY is not set"},
		{name: "an unknown upstream", args: []string{"--upstream", "bedrock"}, wantErr: `--upstream "bedrock"`},
		{name: "router flag with a provider", env: map[string]string{"ANTHROPIC_API_KEY": "ak"},
			args: []string{"--upstream", "anthropic", "--router", "http://10.0.0.1:9"}, wantErr: "--router goes with --upstream router"},
		{name: "local with an upstream", args: []string{"--router", "local", "--upstream", "anthropic"}, wantErr: "--router local is the upstream"},
		{name: "a broker off this machine over http", args: []string{"--router", "local", "--broker-url", "http://broker.example:8080"},
			wantErr: "over https only"},
		{name: "a broker URL with credentials", args: []string{"--router", "local", "--broker-url", "https://u:p@broker.example"},
			wantErr: "must not carry credentials"},
		{name: "a broker over https", args: []string{"--router", "local", "--broker-url", "https://broker.example:8443"},
			want: want{harness: "claude-code", lifetime: 30 * time.Minute, local: true}},
		{name: "a broker's authority without https", args: []string{"--router", "local", "--broker-ca", "ca.pem"},
			wantErr: "--broker-ca goes with an https --broker-url"},
		{name: "a broker's authority missing", args: []string{"--router", "local", "--broker-url", "https://broker.example:8443", "--broker-ca", "/nonexistent/ca.pem"},
			wantErr: "--broker-ca: open /nonexistent/ca.pem"},
		{name: "a broker's authority that is no certificate", args: []string{"--router", "local", "--broker-url", "https://broker.example:8443", "--broker-ca", "up_test.go"},
			wantErr: "no PEM certificate"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for _, k := range []string{routerURLEnv, routerKeyVar, "ANTHROPIC_API_KEY", "OPENAI_API_KEY", "GEMINI_API_KEY"} {
				t.Setenv(k, tt.env[k])
			}
			o, called, err := parseCmd(t, newUpCmd, append([]string{"up"}, tt.args...)...)
			if tt.wantErr != "" {
				if exitCode(err) != 2 || !strings.Contains(err.Error(), tt.wantErr) || called {
					t.Fatalf("up %v: error %v (exit %d, ran %v), want exit 2 containing %q", tt.args, err, exitCode(err), called, tt.wantErr)
				}
				return
			}
			if err != nil || !called {
				t.Fatalf("up %v: %v (ran %v)", tt.args, err, called)
			}
			got := want{image: o.image, harness: o.harness, model: o.model, repo: o.repo, gitRef: o.gitRef,
				routerURL: o.up.URL, routerKey: o.up.Key, lifetime: o.lifetime, local: o.router == routerLocal, showBearer: o.showBearer, timings: o.timings, bridgeOTLP: o.bridgeOTLP}
			if diff := cmp.Diff(tt.want, got, cmp.AllowUnexported(want{})); diff != "" {
				t.Errorf("up %v options (-want +got):\n%s", tt.args, diff)
			}
		})
	}
}

func TestUpCmd_NoImage(t *testing.T) {
	useState(t)
	_, _, err := run(t, "up", "--router", "local")
	if exitCode(err) != 2 || !strings.Contains(err.Error(), "no box image: pass --image REF, or build one with `boxctl build --target docker`") {
		t.Errorf("up without an image or a build = %v, want a usage error naming both ways", err)
	}
}

func TestUpCmd_Runtime(t *testing.T) {
	tests := []struct {
		name    string
		args    []string
		want    string
		wantErr string
	}{
		{name: "default", want: ""},
		{name: "gvisor", args: []string{"--runtime", "gvisor"}, want: "gvisor"},
		{name: "an engine runtime", args: []string{"--runtime", "runsc-debug"}, want: "runsc-debug"},
		{name: "a runtime class", args: []string{"--target", "kubernetes", "--egress", "open", "--runtime-class", "gvisor"}, want: "gvisor"},
		{name: "a class off kubernetes", args: []string{"--runtime-class", "gvisor"}, wantErr: "only --target kubernetes"},
		{name: "both", args: []string{"--target", "kubernetes", "--runtime-class", "kata", "--runtime", "gvisor"}, wantErr: "give one"},
		{name: "not a name", args: []string{"--runtime", "Run SC"}, wantErr: "want gvisor or a runtime name"},
		{name: "a flag", args: []string{"--runtime=-x"}, wantErr: "want gvisor or a runtime name"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, called, err := parseCmd(t, newUpCmd, append([]string{"up", "--router", "local"}, tc.args...)...)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) || called {
					t.Fatalf("up %v = %v, want a usage error with %q", tc.args, err, tc.wantErr)
				}
				return
			}
			if err != nil || !called {
				t.Fatalf("up %v = %v", tc.args, err)
			}
			if got.runtime != tc.want {
				t.Errorf("runtime = %q, want %q", got.runtime, tc.want)
			}
		})
	}
}

// TestUpOptions_poolable: a box whose settings a pooled box cannot take
// at its claim is made cold.
func TestUpOptions_poolable(t *testing.T) {
	for _, tt := range []struct {
		name string
		o    upOptions
		want bool
	}{
		{"plain", upOptions{}, true},
		{"no pool asked", upOptions{noPool: true}, false},
		{"suspendable", upOptions{retention: time.Hour}, false},
		{"idle suspend", upOptions{idle: time.Minute}, false},
		{"confined on docker", upOptions{target: "docker", egress: &egress.Policy{}}, true},
		{"confined on e2b", upOptions{target: "e2b", egress: &egress.Policy{}}, false},
		{"open on e2b", upOptions{target: "e2b", egress: &egress.Policy{Open: true}}, true},
		{"a broker's authority", upOptions{brokerCA: []byte("pem")}, false},
	} {
		if got := tt.o.poolable(); got != tt.want {
			t.Errorf("%s: poolable = %v, want %v", tt.name, got, tt.want)
		}
	}
}

// TestUpOptions_egressHint: an error of confining a box denied by default
// says how to make an open one; other errors, and boxes whose policy was
// asked for, are left as they are.
func TestUpOptions_egressHint(t *testing.T) {
	deny, open := &egress.Policy{}, &egress.Policy{Open: true}
	held := &firewall.HeldError{Bridge: "br-x", PID: 1}
	for _, tt := range []struct {
		name string
		o    upOptions
		err  error
		want bool
	}{
		{"a held network, by default", upOptions{egress: deny}, held, true},
		{"the gate's API", upOptions{egress: deny}, &gate.APIError{Status: 400, Type: "gate_failed"}, true},
		{"no gate", upOptions{egress: deny}, fmt.Errorf("create: %w", docker.ErrEgressUnenforced), true},
		{"a vendor without egress", upOptions{egress: deny}, &vendors.UnsupportedError{Vendor: "x", Field: vendors.FieldEgress}, true},
		{"another error", upOptions{egress: deny}, errors.New("no image"), false},
		{"an allow list asked for", upOptions{egress: deny, allow: []string{"example.com"}}, held, false},
		{"open", upOptions{egress: open}, held, false},
	} {
		got := tt.o.egressHint(tt.err)
		if hinted := strings.Contains(got.Error(), "--egress open"); hinted != tt.want || !errors.Is(got, tt.err) {
			t.Errorf("%s: %v (hinted %v, want %v; wraps the error: %v)", tt.name, got, hinted, tt.want, errors.Is(got, tt.err))
		}
	}
}
