package server

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/tangle-network/boxctl/bridge/engine"
	"github.com/tangle-network/boxctl/bridge/store"
	"github.com/tangle-network/boxctl/bridge/wire"
)

// TestStartup_RoutesWaitForRecovery: with the engine's start in the
// background, /health answers while the recovery of a run the previous
// incarnation left live is still under way, and a read of that run waits
// until the recovery is done (the run ended, its leftover processes
// killed). The recovery is held in its read of /proc: the one process
// there has a FIFO for environ.
func TestStartup_RoutesWaitForRecovery(t *testing.T) {
	procDir := filepath.Join(t.TempDir(), "proc")
	if err := os.MkdirAll(filepath.Join(procDir, "1"), 0o755); err != nil {
		t.Fatal(err)
	}
	fifo := filepath.Join(procDir, "1", "environ")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	v := newEnv(t, config{engine: engine.Options{ProcDir: procDir, Background: true},
		prepare: func(st *store.Store) {
			if _, _, err := st.CreateRun(context.Background(), store.Run{ID: "left", Digest: "d", Harness: "claude-code",
				Model: "m", Marker: engine.MarkerVar + "=left"}); err != nil {
				t.Fatal(err)
			}
		}})
	// release ends the recovery's read of the FIFO; opening it waits for
	// that read, which the recovery of the run left live always reaches.
	released := false
	release := func() {
		if !released {
			released = true
			if f, err := os.OpenFile(fifo, os.O_WRONLY, 0); err == nil {
				f.Close()
			}
		}
	}
	t.Cleanup(release) // before the engine's Close, which waits for the recovery

	read := make(chan wire.RunSnapshot, 1)
	go func() {
		req, _ := http.NewRequest("GET", v.url+"/v1/runs/left", nil)
		req.Header.Set("Authorization", "Bearer "+bearer)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Error(err)
			close(read)
			return
		}
		defer resp.Body.Close()
		var snap wire.RunSnapshot
		if err := json.NewDecoder(resp.Body).Decode(&snap); err != nil {
			t.Error(err)
		}
		read <- snap
	}()
	if resp := v.do(t, "GET", "/health", ""); resp.StatusCode != http.StatusOK {
		t.Errorf("GET /health during the recovery = %d, want 200", resp.StatusCode)
	}
	select {
	case snap := <-read:
		t.Fatalf("GET /v1/runs/left answered %+v during the recovery, want it to wait", snap)
	default:
	}
	release()
	snap := <-read
	if !snap.Terminal || snap.Error == nil || snap.Error.Type != wire.TypeBridgeRestarted {
		t.Errorf("run left live after the recovery = %+v, want it ended bridge_restarted", snap)
	}
}
