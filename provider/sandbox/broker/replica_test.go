package broker_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tangle-network/boxctl/bridge/wire"
	"github.com/tangle-network/boxctl/provider/sandbox/broker"
	"github.com/tangle-network/boxctl/provider/sandbox/replica"
)

// TestBroker_Replica: a box ships its runs with its token and reads back
// only its own; another box, an unknown or revoked token are refused; the
// caller reads every box's runs over the admin API; a broker without a
// replica answers 404, which stops a bridge's shipping.
func TestBroker_Replica(t *testing.T) {
	rep, err := replica.Open(t.Context(), t.TempDir(), replica.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer rep.Close()
	up := []broker.Upstream{{Name: broker.Router, URL: "http://127.0.0.1:1", Key: "k", Auth: broker.AuthAsPresented}}
	b, err := broker.New(broker.Options{Upstreams: up, Replica: rep})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(b)
	defer srv.Close()
	admin := httptest.NewServer(b.Admin(nil))
	defer admin.Close()
	tokA := grant(t, b, broker.Grant{Box: "box-a"})
	tokB := grant(t, b, broker.Grant{Box: "box-b"})
	call := func(method, path, token string, body any) (int, []byte) {
		var rd io.Reader
		if body != nil {
			j, _ := json.Marshal(body)
			rd = bytes.NewReader(j)
		}
		req, _ := http.NewRequestWithContext(t.Context(), method, srv.URL+path, rd)
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		out, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, out
	}
	batch := wire.ReplicaBatch{Status: "running", First: 1, Events: []json.RawMessage{json.RawMessage(`{"a":1}`), json.RawMessage(`{"a":2}`)}}
	if st, body := call(http.MethodPost, wire.ReplicaPath+"/run_a1", tokA, batch); st != http.StatusOK {
		t.Fatalf("box A ships: %d %s", st, body)
	}
	st, body := call(http.MethodPost, wire.ReplicaPath+"/run_a1", tokA, wire.ReplicaBatch{Status: "running", First: 7})
	var gap struct {
		Type string
		Run  wire.ReplicaRun
	}
	if _ = json.Unmarshal(body, &gap); st != http.StatusConflict || gap.Type != wire.TypeReplicaGap || gap.Run.LastSeq != 2 {
		t.Errorf("a gap: %d %s, want 409 replica_gap at 2", st, body)
	}
	for name, c := range map[string]struct {
		method, path, token string
		body                any
		want                int
	}{
		"no token":         {http.MethodGet, wire.ReplicaPath, "", nil, http.StatusUnauthorized},
		"an unknown token": {http.MethodGet, wire.ReplicaPath, "bxt_nope", nil, http.StatusUnauthorized},
		"a bad run id":     {http.MethodPost, wire.ReplicaPath + "/..%2Fx", tokA, batch, http.StatusBadRequest},
		"a bad body":       {http.MethodPost, wire.ReplicaPath + "/run_a2", tokA, "not a batch", http.StatusBadRequest},
		"another route":    {http.MethodDelete, wire.ReplicaPath, tokA, nil, http.StatusNotFound},
	} {
		if st, body := call(c.method, c.path, c.token, c.body); st != c.want {
			t.Errorf("%s: %d %s, want %d", name, st, body, c.want)
		}
	}
	// Box B sees none of A's runs.
	var runs wire.ReplicaRuns
	st, body = call(http.MethodGet, wire.ReplicaPath, tokB, nil)
	if _ = json.Unmarshal(body, &runs); st != http.StatusOK || len(runs.Runs) != 0 {
		t.Errorf("box B lists %d %s, want none of A's", st, body)
	}
	st, body = call(http.MethodGet, wire.ReplicaPath, tokA, nil)
	if _ = json.Unmarshal(body, &runs); st != http.StatusOK || len(runs.Runs) != 1 || runs.Runs[0].LastSeq != 2 {
		t.Errorf("box A lists %d %s", st, body)
	}
	// The caller reads A's run, also once A's token is revoked.
	if err := b.Revoke(t.Context(), "box-a"); err != nil {
		t.Fatal(err)
	}
	if st, _ := call(http.MethodGet, wire.ReplicaPath, tokA, nil); st != http.StatusUnauthorized {
		t.Errorf("a revoked token lists the replica: %d", st)
	}
	evs, err := b.ReplicaEvents(t.Context(), "box-a", "run_a1", 1, 10)
	if err != nil || len(evs) != 1 || evs[0].Seq != 2 || string(evs[0].Data) != `{"a":2}` {
		t.Errorf("ReplicaEvents = %+v, %v", evs, err)
	}
	resp, err := http.Get(admin.URL + "/v1/replica/box-a/runs/run_a1/events?after=0")
	if err != nil {
		t.Fatal(err)
	}
	out, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !bytes.Contains(out, []byte(`"seq":2`)) {
		t.Errorf("the admin API's events: %d %s", resp.StatusCode, out)
	}
	if resp, err := http.Get(admin.URL + "/v1/replica/box-a/runs/run_a1/events?limit=0"); err != nil || resp.StatusCode != http.StatusBadRequest {
		t.Errorf("limit 0: %v %v", resp.StatusCode, err)
	}

	none, err := broker.New(broker.Options{Upstreams: up})
	if err != nil {
		t.Fatal(err)
	}
	srv2 := httptest.NewServer(none)
	defer srv2.Close()
	tok := grant(t, none, broker.Grant{Box: "box-c"})
	req, _ := http.NewRequest(http.MethodGet, srv2.URL+wire.ReplicaPath, nil)
	req.Header.Set("Authorization", "Bearer "+tok)
	resp, err = http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound {
		t.Errorf("a broker without a replica: %d, want 404", resp.StatusCode)
	}
}

// TestBroker_ReplicaTurns: the caller records a box's turns and reads
// them back over the admin API (the client over a unix socket, as the
// CLI's); a malformed turn is a 400 the client reports, a broker without
// a replica a 404; a box cannot reach the turn routes with its token.
func TestBroker_ReplicaTurns(t *testing.T) {
	rep, err := replica.Open(t.Context(), t.TempDir(), replica.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer rep.Close()
	up := []broker.Upstream{{Name: broker.Router, URL: "http://127.0.0.1:1", Key: "k", Auth: broker.AuthAsPresented}}
	serve := func(b *broker.Broker) *broker.Client {
		sock := filepath.Join(t.TempDir(), "admin.sock")
		ln, err := net.Listen("unix", sock)
		if err != nil {
			t.Fatal(err)
		}
		srv := &http.Server{Handler: b.Admin(nil)}
		go srv.Serve(ln)
		t.Cleanup(func() { srv.Close() })
		return broker.Dial(sock)
	}
	b, err := broker.New(broker.Options{Upstreams: up, Replica: rep})
	if err != nil {
		t.Fatal(err)
	}
	c := serve(b)
	want := replica.Turn{Run: "run_1", SessionID: "s1", TurnID: "t1", Prompt: "hello"}
	if err := c.NoteReplicaTurn(t.Context(), "box-a", want); err != nil {
		t.Fatal(err)
	}
	got, err := c.ReplicaTurns(t.Context(), "box-a")
	if err != nil || len(got) != 1 || got[0].Prompt != "hello" || got[0].RunBox != "box-a" || got[0].At == 0 {
		t.Fatalf("turns: %+v %v", got, err)
	}
	var api *broker.APIError
	if err := c.NoteReplicaTurn(t.Context(), "box-a", replica.Turn{Run: "run_2"}); !errors.As(err, &api) || api.Status != http.StatusBadRequest {
		t.Errorf("a turn without a session: %v, want a 400", err)
	}
	// A prompt at the bound, each byte escaped in JSON (six times its
	// size), is recorded; one over the bound is refused by the replica.
	escaped := strings.Repeat("\x01", replica.MaxPromptBytes)
	if err := c.NoteReplicaTurn(t.Context(), "box-a", replica.Turn{Run: "run_3", SessionID: "s1", Prompt: escaped}); err != nil {
		t.Errorf("a prompt at the bound, escaped: %v", err)
	}
	if err := c.NoteReplicaTurn(t.Context(), "box-a", replica.Turn{Run: "run_4", SessionID: "s1", Prompt: escaped + "x"}); !errors.As(err, &api) || api.Status != http.StatusBadRequest {
		t.Errorf("a prompt over the bound: %v, want a 400", err)
	}
	tok := grant(t, b, broker.Grant{Box: "box-a"})
	srv := httptest.NewServer(b)
	defer srv.Close()
	req, _ := http.NewRequest(http.MethodGet, srv.URL+"/v1/replica/box-a/turns", nil)
	req.Header.Set("Authorization", "Bearer "+tok)
	if resp, err := http.DefaultClient.Do(req); err != nil {
		t.Fatal(err)
	} else {
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if bytes.Contains(body, []byte("hello")) {
			t.Errorf("the box read its turns with its token: %d %s", resp.StatusCode, body)
		}
	}
	none, err := broker.New(broker.Options{Upstreams: up})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := serve(none).ReplicaTurns(t.Context(), "box-a"); !errors.Is(err, broker.ErrUnknownBox) {
		t.Errorf("a broker without a replica: %v, want not_found", err)
	}
}
