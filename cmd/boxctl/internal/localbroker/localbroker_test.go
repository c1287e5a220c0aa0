package localbroker

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tangle-network/boxctl/internal/polltest"
	"github.com/tangle-network/boxctl/provider/sandbox/broker"
)

// serve runs Serve in the background and waits for its admin API.
func serve(t *testing.T, o Options) (<-chan error, *broker.Client) {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- Serve(context.Background(), o) }()
	polltest.Until(t, 10*time.Second, "the broker's admin API", func() bool { return answers(t.Context(), o.Admin) })
	return done, broker.Dial(o.Admin)
}

// TestServe: the admin socket is the user's only (0600 in a 0700
// directory), a second broker on it is refused, and the broker ends once
// its socket is gone.
func TestServe(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "broker")
	sock := filepath.Join(dir, "broker.sock")
	done, c := serve(t, Options{Admin: sock, Idle: time.Hour})
	for path, want := range map[string]os.FileMode{dir: 0o700, sock: 0o600} {
		fi, err := os.Stat(path)
		if err != nil || fi.Mode().Perm() != want {
			t.Errorf("%s: mode %v, %v; want %v", path, fi.Mode().Perm(), err, want)
		}
	}
	if err := Serve(t.Context(), Options{Admin: sock}); err == nil || !strings.Contains(err.Error(), "another broker") {
		t.Errorf("a second broker on the socket = %v, want a refusal", err)
	}
	url, err := c.Listen(t.Context(), "127.0.0.1")
	if err != nil || !strings.HasPrefix(url, "http://127.0.0.1:") {
		t.Errorf("Listen = %q, %v", url, err)
	}
	if _, err := c.Listen(t.Context(), "not-an-ip"); err == nil {
		t.Error("Listen on a name, not an address, was accepted")
	}
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("Serve = %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the broker still runs after its socket was removed")
	}
	var api *broker.APIError
	if _, err := c.Status(t.Context()); err == nil || errors.As(err, &api) {
		t.Errorf("Status after the end = %v, want no answer", err)
	}
}

// TestServe_KeepAwake: a caller at work (KeepAwake) keeps a broker with no
// box past its idle time; once it stops, the broker ends.
func TestServe_KeepAwake(t *testing.T) {
	const idle = time.Second
	done, c := serve(t, Options{Admin: filepath.Join(t.TempDir(), "broker.sock"), Idle: idle})
	stop := KeepAwake(t.Context(), c, idle/5)
	select {
	case err := <-done:
		t.Fatalf("the broker ended while a caller kept it awake: %v", err)
	case <-time.After(3 * idle):
	}
	stop()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("Serve = %v", err)
		}
	case <-time.After(10 * idle):
		t.Fatal("the broker still runs long past its idle time")
	}
}
