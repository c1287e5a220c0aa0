package broker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/tangle-network/boxctl/bridge/wire"
	"github.com/tangle-network/boxctl/internal/adminapi"
	"github.com/tangle-network/boxctl/internal/modelapi"
	"github.com/tangle-network/boxctl/provider/sandbox/replica"
)

// MaxReplicaBatchBytes bounds a batch a box ships.
const MaxReplicaBatchBytes = 8 << 20

// serveReplica serves a box's replica routes (wire.ReplicaPath), the box
// known by its token: the list of its runs the replica holds, and a batch
// of a run's events. A box reaches its own runs only.
func (b *Broker) serveReplica(w http.ResponseWriter, r *http.Request) {
	kind, token := modelapi.PresentedKey(r)
	g, why := b.admitReplica(r, token)
	if why != "" {
		b.refuse(w, r, modelapi.FamilyNone, kind, why)
		return
	}
	ctx, box := r.Context(), g.Box
	rest := strings.TrimPrefix(r.URL.Path, wire.ReplicaPath)
	switch {
	case b.o.Replica == nil:
		adminapi.Write(w, http.StatusNotFound, adminapi.Error{Type: "not_found", Message: "this broker keeps no replica"})
	case rest == "" && r.Method == http.MethodGet:
		runs, err := b.o.Replica.Runs(ctx, box)
		if err != nil {
			b.replicaFailed(w, box, err)
			return
		}
		adminapi.Write(w, http.StatusOK, wire.ReplicaRuns{Runs: runs})
	case strings.HasPrefix(rest, "/") && r.Method == http.MethodPost:
		run := rest[1:]
		if err := wire.ValidRunID(run); err != nil {
			adminapi.Write(w, http.StatusBadRequest, adminapi.Error{Type: "invalid_run", Message: err.Error()})
			return
		}
		var batch wire.ReplicaBatch
		dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, MaxReplicaBatchBytes))
		if err := dec.Decode(&batch); err != nil {
			adminapi.Write(w, http.StatusBadRequest, adminapi.Error{Type: "invalid_body", Message: err.Error()})
			return
		}
		held, err := b.o.Replica.Append(ctx, box, run, batch)
		if _, bad := errors.AsType[*replica.BatchError](err); bad {
			adminapi.Write(w, http.StatusBadRequest, adminapi.Error{Type: "invalid_batch", Message: err.Error()})
			return
		}
		if _, gap := errors.AsType[*replica.GapError](err); gap {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusConflict)
			_ = json.NewEncoder(w).Encode(map[string]any{"type": wire.TypeReplicaGap, "message": err.Error(), "run": held})
			return
		}
		if err != nil {
			b.replicaFailed(w, box, err)
			return
		}
		adminapi.Write(w, http.StatusOK, held)
	default:
		adminapi.Write(w, http.StatusNotFound, adminapi.Error{Type: "not_found", Message: "no such replica route"})
	}
}

func (b *Broker) replicaFailed(w http.ResponseWriter, box string, err error) {
	b.o.Logger.Warn("broker: replica", "box", box, "err", err)
	adminapi.Write(w, http.StatusServiceUnavailable, adminapi.Error{Type: "replica_unavailable", Message: "the replica did not take the request"})
}

// admitReplica finds the grant of a request to the replica routes: the
// model routes' checks but the route's and the budget's.
func (b *Broker) admitReplica(r *http.Request, token string) (*grant, Refusal) {
	g, why := b.grantOf(r, token)
	if why != "" {
		return nil, why
	}
	return g, ""
}

// maxTurnBody bounds the body of a turn's record: its prompt at
// replica.MaxPromptBytes, each byte escaped, and its ids.
const maxTurnBody = 6*replica.MaxPromptBytes + 64<<10

// replicaAdmin adds the caller's replica routes to mux: GET
// /v1/replica/{box}/runs, GET
// /v1/replica/{box}/runs/{run}/events?after=N&limit=N, and GET and POST
// /v1/replica/{box}/turns (a replica.Turn).
func (b *Broker) replicaAdmin(mux *http.ServeMux) {
	mux.HandleFunc("GET /v1/replica/{box}/turns", func(w http.ResponseWriter, r *http.Request) {
		turns, err := b.ReplicaTurns(r.Context(), r.PathValue("box"))
		if err != nil {
			replicaAdminFailed(w, err)
			return
		}
		adminapi.Write(w, http.StatusOK, map[string]any{"turns": turns})
	})
	mux.HandleFunc("POST /v1/replica/{box}/turns", func(w http.ResponseWriter, r *http.Request) {
		var t replica.Turn
		// A prompt at its bound may grow six times in JSON (\u escapes).
		dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, maxTurnBody))
		if err := dec.Decode(&t); err != nil {
			if _, big := errors.AsType[*http.MaxBytesError](err); big {
				adminapi.Write(w, http.StatusRequestEntityTooLarge, adminapi.Error{Type: "request_too_large",
					Message: fmt.Sprintf("a turn's record is over %d bytes", maxTurnBody)})
				return
			}
			adminapi.Write(w, http.StatusBadRequest, adminapi.Error{Type: "invalid_body", Message: err.Error()})
			return
		}
		if err := b.NoteReplicaTurn(r.Context(), r.PathValue("box"), t); err != nil {
			replicaAdminFailed(w, err)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	})
	mux.HandleFunc("GET /v1/replica/{box}/runs", func(w http.ResponseWriter, r *http.Request) {
		if b.o.Replica == nil {
			adminapi.Write(w, http.StatusNotFound, adminapi.Error{Type: "not_found", Message: "this broker keeps no replica"})
			return
		}
		runs, err := b.o.Replica.Runs(r.Context(), r.PathValue("box"))
		if err != nil {
			adminapi.Write(w, http.StatusServiceUnavailable, adminapi.Error{Type: "replica_unavailable", Message: err.Error()})
			return
		}
		adminapi.Write(w, http.StatusOK, wire.ReplicaRuns{Runs: runs})
	})
	mux.HandleFunc("GET /v1/replica/{box}/runs/{run}/events", func(w http.ResponseWriter, r *http.Request) {
		if b.o.Replica == nil {
			adminapi.Write(w, http.StatusNotFound, adminapi.Error{Type: "not_found", Message: "this broker keeps no replica"})
			return
		}
		after, err1 := strconv.ParseInt(or(r.URL.Query().Get("after"), "0"), 10, 64)
		limit, err2 := strconv.Atoi(or(r.URL.Query().Get("limit"), "1000"))
		if err := errors.Join(err1, err2); err != nil || after < 0 || limit < 1 || limit > 10000 {
			adminapi.Write(w, http.StatusBadRequest, adminapi.Error{Type: "invalid_query", Message: "after >= 0 and 1 <= limit <= 10000"})
			return
		}
		evs, err := b.o.Replica.Events(r.Context(), r.PathValue("box"), r.PathValue("run"), after, limit)
		if errors.Is(err, replica.ErrNotFound) {
			adminapi.Write(w, http.StatusNotFound, adminapi.Error{Type: "not_found", Message: err.Error()})
			return
		}
		if err != nil {
			adminapi.Write(w, http.StatusServiceUnavailable, adminapi.Error{Type: "replica_unavailable", Message: err.Error()})
			return
		}
		out := make([]ReplicaEvent, len(evs))
		for i, e := range evs {
			out[i] = ReplicaEvent{Seq: e.Seq, Data: e.Data}
		}
		adminapi.Write(w, http.StatusOK, map[string]any{"events": out})
	})
}

// replicaAdminFailed answers a failed replica admin call.
func replicaAdminFailed(w http.ResponseWriter, err error) {
	switch {
	case errors.Is(err, ErrNoReplica):
		adminapi.Write(w, http.StatusNotFound, adminapi.Error{Type: "not_found", Message: "this broker keeps no replica"})
	case errors.As(err, new(*replica.BatchError)):
		adminapi.Write(w, http.StatusBadRequest, adminapi.Error{Type: "invalid_turn", Message: err.Error()})
	default:
		adminapi.Write(w, http.StatusServiceUnavailable, adminapi.Error{Type: "replica_unavailable", Message: err.Error()})
	}
}

func or(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// ReplicaEvent is an event of a run the replica holds.
type ReplicaEvent struct {
	Seq  int64           `json:"seq"`
	Data json.RawMessage `json:"data"`
}

// ReplicaReader reads what a broker's replica holds of a box: a Broker
// (Options.Replica) or a Client of one.
type ReplicaReader interface {
	ReplicaRuns(ctx context.Context, box string) ([]wire.ReplicaRun, error)
	ReplicaEvents(ctx context.Context, box, run string, after int64, limit int) ([]ReplicaEvent, error)
	// ReplicaTurns lists the turns recorded of box, oldest first.
	ReplicaTurns(ctx context.Context, box string) ([]replica.Turn, error)
	// NoteReplicaTurn records a turn of box (replica.Store.NoteTurn).
	NoteReplicaTurn(ctx context.Context, box string, t replica.Turn) error
}

var (
	_ ReplicaReader = (*Broker)(nil)
	_ ReplicaReader = (*Client)(nil)
)

// ErrNoReplica is a broker that keeps no replica.
var ErrNoReplica = errors.New("broker: no replica")

// ReplicaRuns lists the runs the replica holds of box.
func (b *Broker) ReplicaRuns(ctx context.Context, box string) ([]wire.ReplicaRun, error) {
	if b.o.Replica == nil {
		return nil, ErrNoReplica
	}
	return b.o.Replica.Runs(ctx, box)
}

// ReplicaEvents returns up to limit events of box's run after after.
func (b *Broker) ReplicaEvents(ctx context.Context, box, run string, after int64, limit int) ([]ReplicaEvent, error) {
	if b.o.Replica == nil {
		return nil, ErrNoReplica
	}
	evs, err := b.o.Replica.Events(ctx, box, run, after, limit)
	if err != nil {
		return nil, err
	}
	out := make([]ReplicaEvent, len(evs))
	for i, e := range evs {
		out[i] = ReplicaEvent{Seq: e.Seq, Data: e.Data}
	}
	return out, nil
}

// ReplicaTurns lists the turns recorded of box, oldest first.
func (b *Broker) ReplicaTurns(ctx context.Context, box string) ([]replica.Turn, error) {
	if b.o.Replica == nil {
		return nil, ErrNoReplica
	}
	return b.o.Replica.Turns(ctx, box)
}

// NoteReplicaTurn records a turn of box.
func (b *Broker) NoteReplicaTurn(ctx context.Context, box string, t replica.Turn) error {
	if b.o.Replica == nil {
		return ErrNoReplica
	}
	return b.o.Replica.NoteTurn(ctx, box, t)
}

// ReplicaTurns lists the turns recorded of box, oldest first.
func (c *Client) ReplicaTurns(ctx context.Context, box string) ([]replica.Turn, error) {
	var out struct {
		Turns []replica.Turn `json:"turns"`
	}
	err := c.do(ctx, http.MethodGet, "/v1/replica/"+url.PathEscape(box)+"/turns", nil, &out)
	return out.Turns, err
}

// NoteReplicaTurn records a turn of box.
func (c *Client) NoteReplicaTurn(ctx context.Context, box string, t replica.Turn) error {
	return c.do(ctx, http.MethodPost, "/v1/replica/"+url.PathEscape(box)+"/turns", t, nil)
}

// ReplicaRuns lists the runs the broker's replica holds of box.
func (c *Client) ReplicaRuns(ctx context.Context, box string) ([]wire.ReplicaRun, error) {
	var out wire.ReplicaRuns
	err := c.do(ctx, http.MethodGet, "/v1/replica/"+url.PathEscape(box)+"/runs", nil, &out)
	return out.Runs, err
}

// ReplicaEvents returns up to limit events of box's run after after.
func (c *Client) ReplicaEvents(ctx context.Context, box, run string, after int64, limit int) ([]ReplicaEvent, error) {
	var out struct {
		Events []ReplicaEvent `json:"events"`
	}
	err := c.do(ctx, http.MethodGet, fmt.Sprintf("/v1/replica/%s/runs/%s/events?after=%d&limit=%d", url.PathEscape(box), url.PathEscape(run), after, limit), nil, &out)
	return out.Events, err
}
