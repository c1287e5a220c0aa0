package sandbox_test

import (
	"context"
	"crypto/tls"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tangle-network/boxctl/internal/boxtest"
	"github.com/tangle-network/boxctl/internal/brokertls"
	"github.com/tangle-network/boxctl/internal/sandboxtest"
	"github.com/tangle-network/boxctl/provider"
	"github.com/tangle-network/boxctl/provider/sandbox"
)

// TestBroker_LiveTLS: boxes reach a broker over https whose certificate a
// private authority signed (a broker behind a tunnel, up --broker-url)
// once Options.BrokerCA names that authority; a box that does not trust
// it gets no model answer. The box's relay is its one client of the
// broker, so no harness's trust store is touched.
func TestBroker_LiveTLS(t *testing.T) {
	f := setup(t)
	img := boxtest.Image(t, boxtest.Options{Harnesses: []string{"claude-code"}})
	// The broker's own handler, served over TLS where the boxes reach
	// this machine (the address of the fixture's plain one).
	u, err := url.Parse(f.Broker.URL)
	if err != nil {
		t.Fatal(err)
	}
	host := u.Hostname()
	caPEM, cert := privateAuthority(t, host)
	l, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: f.Broker.Broker, ReadHeaderTimeout: 10 * time.Second,
		TLSConfig: &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}}
	go func() { _ = srv.ServeTLS(l, "", "") }()
	t.Cleanup(func() { _ = srv.Close() })
	tlsURL := "https://" + l.Addr().String()

	for _, tc := range []struct {
		name    string
		ca      []byte
		answers bool
	}{
		{"trusted", caPEM, true},
		{"untrusted", nil, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := f.On(t, sandboxtest.Target{Name: "docker", Vendor: f.Vendor, Image: img}, func(o *sandbox.Options) {
				o.Router, o.Broker, o.BrokerURL, o.BrokerCA = sandbox.Router{}, f.Broker, tlsURL, tc.ca
			})
			env := create(t, p, sandbox.CreateRequest{Profile: provider.Profile{Harness: "claude-code"}})
			marker := "tls turn " + randText()
			ctx := t.Context()
			if !tc.answers {
				// The harness retries a failed model call for minutes:
				// a bounded look at it is enough, since a refused TLS
				// handshake is refused at once.
				var cancel context.CancelFunc
				ctx, cancel = context.WithTimeout(ctx, 15*time.Second)
				defer cancel()
			}
			text, _, err := sandboxtest.Turn(ctx, env, provider.Turn{Prompt: marker})
			reached := false
			for _, r := range f.Stub.Requests() {
				reached = reached || strings.Contains(r.Prompt, marker)
			}
			if tc.answers {
				if err != nil || text != replyText || !reached {
					t.Fatalf("turn through the https broker = %q, %v (the model saw it: %v)", text, err, reached)
				}
				return
			}
			if err == nil && text == replyText || reached {
				t.Fatalf("a box that does not trust the broker's authority got a model answer (%q, %v)", text, err)
			}
		})
	}
}

// privateAuthority makes a certificate authority and a server certificate
// it signs for host (an IP address or a name); it returns the authority's
// PEM and the server's key pair.
func privateAuthority(t *testing.T, host string) ([]byte, tls.Certificate) {
	t.Helper()
	dir := t.TempDir()
	if err := brokertls.Write(dir, []string{host}, time.Hour); err != nil {
		t.Fatal(err)
	}
	srv := filepath.Join(dir, brokertls.Server)
	pair, err := tls.LoadX509KeyPair(filepath.Join(srv, brokertls.CertFile), filepath.Join(srv, brokertls.KeyFile))
	if err != nil {
		t.Fatal(err)
	}
	ca, err := os.ReadFile(filepath.Join(srv, brokertls.CAFile))
	if err != nil {
		t.Fatal(err)
	}
	return ca, pair
}
