package main

import (
	"context"
	"io"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/tangle-network/boxctl/internal/boxtest"
	"github.com/tangle-network/boxctl/internal/jssdk"
	"github.com/tangle-network/boxctl/internal/testbed"
	"github.com/tangle-network/boxctl/vendors/open"
)

func TestEmulateDaytona_Flags(t *testing.T) {
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"bad snapshot", []string{"--snapshot", "noimage"}, `--snapshot "noimage": want NAME=IMAGE`},
		{"bad error rate", []string{"--error-rate", "1.5"}, "--error-rate 1.5: want 0 to 1"},
		{"bad lifetime", []string{"--max-lifetime", "0s"}, "--max-lifetime 0s"},
		{"extra argument", []string{"x"}, "unknown command"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := boxctl(t, t.Context(), nil, append([]string{"emulate", "daytona"}, tt.args...)...)
			if r.code != 2 || r.err == nil || !strings.Contains(r.err.Error(), tt.want) {
				t.Errorf("emulate daytona %v: exit %d, %v; want 2 with %q", tt.args, r.code, r.err, tt.want)
			}
		})
	}
}

// TestEmulateDaytona_Serves starts `boxctl emulate daytona`, reads the
// environment it prints, calls the control plane with it, runs the
// README's JavaScript example as printed with the pinned official SDK in
// that environment, and stops it with its context (Ctrl-C).
func TestEmulateDaytona_Serves(t *testing.T) {
	env := testbed.Require(t)
	img := boxtest.Image(t, boxtest.Options{})
	sdk := jssdk.Require(t, "daytona")
	t.Setenv("DOCKER_HOST", env.DockerHost)
	printed, stop := startEmulate(t, open.EnvDaytonaKey, "daytona", "--snapshot", "box="+img)
	defer stop()
	u, key := printed[open.EnvDaytonaURL], printed[open.EnvDaytonaKey]
	if !strings.HasPrefix(u, "http://127.0.0.1:") || !strings.HasSuffix(u, "/api") || !strings.HasPrefix(key, "dtn_") ||
		printed[open.EnvDaytonaTarget] == "" {
		t.Fatalf("printed %v, want the API URL, the target and a fresh key", printed)
	}
	for _, c := range []struct{ path, want string }{
		{"/sandbox", `"items":[]`},
		// With its defaults, push access is the test bed's registry.
		{"/docker-registry/registry-push-access", `"registryUrl":"127.0.0.1:5000"`},
	} {
		req, _ := http.NewRequestWithContext(t.Context(), http.MethodGet, u+c.path, nil)
		req.Header.Set("Authorization", "Bearer "+key)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || !strings.Contains(string(b), c.want) {
			t.Errorf("GET %s with the printed key = %d %s, want 200 with %s", c.path, resp.StatusCode, b, c.want)
		}
	}
	t.Run("the README's SDK example", func(t *testing.T) {
		readme, err := os.ReadFile("../../README.md")
		if err != nil {
			t.Fatal(err)
		}
		_, rest, ok := strings.Cut(string(readme), "with `hello.mjs`:\n\n```js\n")
		example, _, ok2 := strings.Cut(rest, "```\n")
		if !ok || !ok2 {
			t.Fatal("README.md has no hello.mjs example")
		}
		rctx, rcancel := context.WithTimeout(t.Context(), 5*time.Minute)
		defer rcancel()
		res, err := sdk.Run(rctx, jssdk.RunOptions{Script: []byte(example), Env: printed})
		if err != nil {
			t.Fatal(err)
		}
		if want := "0 hello from Linux\nhi\n"; res.Text != want {
			t.Errorf("the example printed %q, want the README's %q", res.Text, want)
		}
	})
}
