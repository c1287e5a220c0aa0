package bridge

import (
	"errors"
	"flag"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/tangle-network/boxctl/bridge/jail"
	"github.com/tangle-network/boxctl/bridge/wire"
)

func TestConfigFromEnv(t *testing.T) {
	env := map[string]string{
		"BRIDGE_HOST": "0.0.0.0", "BRIDGE_PORT": "4000", "BRIDGE_BEARER": "b", "BRIDGE_DATA_DIR": "/d",
		"SANDBOX_PROFILES_DIR": "/p", "BRIDGE_BACKENDS": " Claude ", "CLAUDE_BIN": "/opt/claude", "CLAUDE_TIMEOUT_MS": "1500",
		"TANGLE_API_KEY": "k", "TANGLE_ROUTER_URL": "http://r", "BRIDGE_SSE_HEARTBEAT_MS": "250",
		"BRIDGE_MAX_RUNS": "7", "BRIDGE_REPLAY_MAX_EVENTS": "9",
		"BRIDGE_SESSION_IDLE_MS": "-1", "BRIDGE_SESSION_IDLE_CLOSE_MS": "3600000",
		"BRIDGE_MAX_SESSION_PROCS": "3", "BRIDGE_BODY_TIMEOUT_MS": "2000", "BRIDGE_CONN_IDLE_MS": "3000", "BRIDGE_MAX_CONNS": "64",
		"BRIDGE_JAIL_MODE": "write-jail", "WORKER_NET_JAIL": "1",
	}
	c, err := ConfigFromEnv(func(k string) string { return env[k] })
	if err != nil {
		t.Fatal(err)
	}
	want := Config{Host: "0.0.0.0", Port: 4000, Bearer: "b", DataDir: "/d", ProfilesDir: "/p", Backends: []string{"claude"},
		Bins: map[string]string{"claude": "/opt/claude"}, Timeouts: map[string]time.Duration{"claude": 1500 * time.Millisecond},
		RouterKey: "k", RouterURL: "http://r", Keepalive: 250 * time.Millisecond, MaxRuns: 7, MaxEvents: 9, LogLevel: "info",
		SessionIdle: -time.Millisecond, SessionIdleClose: time.Hour, MaxSessionProcs: 3,
		BodyTimeout: 2 * time.Second, ConnIdle: 3 * time.Second, MaxConns: 64, JailFloor: jail.Floor{Mode: wire.JailWrite, Net: true}}
	if diff := cmp.Diff(want, c); diff != "" {
		t.Errorf("ConfigFromEnv (-want +got):\n%s", diff)
	}
	if err := c.Validate(); err != nil {
		t.Errorf("Validate = %v", err)
	}

	// Flags override the environment; secrets come from files.
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "bearer"), []byte("from-file\n"), 0o600)
	fs := flag.NewFlagSet("t", flag.ContinueOnError)
	sf := c.RegisterFlags(fs)
	if err := fs.Parse([]string{"-port", "5000", "-claude-bin", "/x/claude", "-claude-timeout", "2s", "-bearer-file", filepath.Join(dir, "bearer")}); err != nil {
		t.Fatal(err)
	}
	if err := sf.Load(&c); err != nil {
		t.Fatal(err)
	}
	if c.Port != 5000 || c.Bins["claude"] != "/x/claude" || c.Timeouts["claude"] != 2*time.Second || c.Bearer != "from-file" {
		t.Errorf("after flags: %+v", c)
	}
}

func TestConfig_Validate(t *testing.T) {
	base := Config{Host: "127.0.0.1", Port: 1, DataDir: "/d", Backends: []string{"claude"}}
	tests := []struct {
		name   string
		mod    func(*Config)
		wantOK bool
	}{
		{"loopback without bearer", func(*Config) {}, true},
		{"localhost", func(c *Config) { c.Host = "localhost" }, true},
		{"ipv6 loopback", func(c *Config) { c.Host = "::1" }, true},
		{"any without bearer", func(c *Config) { c.Host = "0.0.0.0" }, false},
		{"any with bearer", func(c *Config) { c.Host, c.Bearer = "0.0.0.0", "b" }, true},
		{"unknown backend", func(c *Config) { c.Backends = []string{"emacs"} }, false},
		{"no backends", func(c *Config) { c.Backends = nil }, false},
		{"bad port", func(c *Config) { c.Port = 70000 }, false},
		{"router authority without the relay", func(c *Config) { c.RouterCA = testCA }, false},
		{"router authority with the relay", func(c *Config) { c.RouterCA, c.ModelRelay = testCA, true }, true},
		{"router authority that is no certificate", func(c *Config) { c.RouterCA, c.ModelRelay = "not pem", true }, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := base
			tt.mod(&c)
			err := c.Validate()
			if (err == nil) != tt.wantOK {
				t.Errorf("Validate = %v, want ok %v", err, tt.wantOK)
			}
			if tt.name == "any without bearer" && !errors.Is(err, ErrNoBearer) {
				t.Errorf("Validate = %v, want ErrNoBearer", err)
			}
		})
	}
}

// TestConfigFromEnv_JailFloor refuses a jail floor the TypeScript bridge
// refuses to start with: a misspelt floor must never mean no floor.
func TestConfigFromEnv_JailFloor(t *testing.T) {
	for _, env := range []map[string]string{
		{"BRIDGE_JAIL_MODE": "fs_jail"},
		{"BRIDGE_NET_JAIL_MODE": "true"},
	} {
		if c, err := ConfigFromEnv(func(k string) string { return env[k] }); err == nil {
			t.Errorf("ConfigFromEnv(%v) = floor %+v, want an error", env, c.JailFloor)
		}
	}
}

// testCA is a self-signed certificate (CN=boxctl test) in PEM.
const testCA = `-----BEGIN CERTIFICATE-----
MIIBTDCB86ADAgECAgEBMAoGCCqGSM49BAMCMBYxFDASBgNVBAMTC2JveGN0bCB0
ZXN0MB4XDTI2MDEwMTAwMDAwMFoXDTM2MDEwMTAwMDAwMFowFjEUMBIGA1UEAxML
Ym94Y3RsIHRlc3QwWTATBgcqhkjOPQIBBggqhkjOPQMBBwNCAATNsydxNfDClou4
31FucU5bWwu2HSIT2FthPeUm7x3TKK3bLD59N3VPw3iQf0D0BYJLbq/xb0kqCIY/
Cn2NP3ZBozIwMDAPBgNVHRMBAf8EBTADAQH/MB0GA1UdDgQWBBSAELCfAKAoZVYf
34F3fhUpvR80XjAKBggqhkjOPQQDAgNIADBFAiATSyAExX6pZIYr7M2H878H7rAK
bFTKpU7gF9dni/shpwIhALf5WZkigFO6N8SDFGlJoGbDvGSpRE4/AJ+ltv1uRoI9
-----END CERTIFICATE-----
`

// TestStartRelay: the relay starts when asked and there is a model
// endpoint for it (in standby, the claim's); without one the harnesses
// keep their own endpoints.
func TestStartRelay(t *testing.T) {
	for _, tt := range []struct {
		name    string
		c       Config
		standby bool
		want    bool
	}{
		{"not asked", Config{RouterURL: "http://127.0.0.1:9"}, false, false},
		{"asked, with an endpoint", Config{ModelRelay: true, RouterURL: "http://127.0.0.1:9"}, false, true},
		{"asked, no endpoint", Config{ModelRelay: true}, false, false},
		{"asked in standby", Config{ModelRelay: true}, true, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			r, err := startRelay(tt.c, slog.New(slog.DiscardHandler), tt.standby)
			if err != nil {
				t.Fatal(err)
			}
			if r != nil {
				defer r.Close()
			}
			if (r != nil) != tt.want {
				t.Errorf("relay started = %v, want %v", r != nil, tt.want)
			}
		})
	}
}
