package branch

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/tangle-network/boxctl/bridge/store"
	"github.com/tangle-network/boxctl/bridge/wire"
	"github.com/tangle-network/boxctl/internal/treecopy"
)

// Options configure a Manager. Zero values mean the defaults.
type Options struct {
	// Store records the checkpoints and forks (required).
	Store *store.Store
	// Dir is the bridge's data directory: copies are kept under it, and a
	// copied workspace leaves it out ("": no copies are made; lookups and
	// cleanups still answer).
	Dir string
	// Logger receives the failures nobody is answered about: a copy that
	// could not be removed (default: discard).
	Logger *slog.Logger
}

// Manager keeps the workspace branches of one bridge.
type Manager struct {
	opts Options
	log  *slog.Logger
}

// New returns a manager.
func New(opts Options) (*Manager, error) {
	if opts.Store == nil {
		return nil, errors.New("branch: Store is required")
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	return &Manager{opts: opts, log: opts.Logger}, nil
}

// CheckCopies answers whether the manager can make copies: a not_configured
// error when it has no data directory to keep them in.
func (m *Manager) CheckCopies() error {
	if m.opts.Dir == "" {
		return &wire.ErrorBody{Type: wire.TypeNotConfigured, Message: "the bridge has no data directory to keep workspace copies in"}
	}
	return nil
}

func (m *Manager) dir(kind, id string) string {
	return filepath.Join(m.opts.Dir, "workspaces", kind+"s", id)
}

func invalid(msg string) error { return &wire.ErrorBody{Type: wire.TypeInvalidRequest, Message: msg} }

func notFound(msg string) error { return &wire.ErrorBody{Type: wire.TypeNotFound, Message: msg} }

// outcome is how the resource bound to a key answers a request of a
// digest: with status and its reference when the digests match and it
// lives, conflict when the digests differ, not_found for a lookup of a
// deleted or absent one, unknown for a repeat of a request whose resource
// was deleted.
type outcome[T any] struct {
	status, existing, message string
	retryable                 *bool
	ref                       *T
}

func outcomeOf[T any](digest string, got *store.Resource, status string) (outcome[T], error) {
	o := outcome[T]{status: status}
	switch {
	case got == nil:
		o.status = wire.BranchNotFound
	case got.RequestDigest != digest:
		o.status, o.existing = wire.BranchConflict, got.RequestDigest
	case !got.DeletedAt.IsZero() && status == wire.BranchFound:
		o.status = wire.BranchNotFound
	case !got.DeletedAt.IsZero():
		o.status, o.message, o.retryable = wire.BranchUnknown, got.Kind+" "+got.ID+" was deleted", ptr(false)
	case got.Ref != nil:
		o.ref = new(T)
		if err := json.Unmarshal(got.Ref, o.ref); err != nil {
			return o, wire.Fault("decode "+got.Kind, err)
		}
	}
	return o, nil
}

// bound is the outcome for a keyed request of the resource its key is
// bound to, status its answer when it is the request's own; bound is false
// when the key is free.
func bound[T any](ctx context.Context, st *store.Store, kind, key, digest, status string) (_ outcome[T], bound bool, _ error) {
	got, bound, err := store.Bound(st.ResourceByKey(ctx, kind, key))
	if err != nil {
		return outcome[T]{}, false, wire.Fault("load "+kind, err)
	}
	if !bound {
		return outcome[T]{}, false, nil
	}
	o, err := outcomeOf[T](digest, &got, status)
	return o, true, err
}

// lookup is the outcome of the lookup of a key of kind.
func lookup[T any](ctx context.Context, st *store.Store, kind string, req wire.OperationLookup) (outcome[T], error) {
	if err := wire.ValidKeyed(req.IdempotencyKey, req.RequestDigest); err != nil {
		return outcome[T]{}, invalid(err.Error())
	}
	o, found, err := bound[T](ctx, st, kind, req.IdempotencyKey, req.RequestDigest, wire.BranchFound)
	if err != nil || found {
		return o, err
	}
	return outcomeOf[T](req.RequestDigest, nil, wire.BranchFound)
}

// record records res, a new copy at res.Path, and returns the outcome of
// the resource bound to its key: created, or replayed when another
// request with the key won. The copy is removed unless it was recorded.
func record[T any](ctx context.Context, st *store.Store, res store.Resource) (outcome[T], error) {
	got, err := st.AddResource(ctx, res)
	if err != nil {
		os.RemoveAll(res.Path)
	}
	switch {
	case errors.Is(err, store.ErrResourceExists):
		return outcomeOf[T](res.RequestDigest, &got, wire.BranchReplayed)
	case errors.Is(err, store.ErrNotFound): // a fork's checkpoint was deleted meanwhile
		return outcome[T]{}, notFound("checkpoint " + res.ParentID + " was deleted")
	case err != nil:
		return outcome[T]{}, wire.Fault("record "+res.Kind, err)
	}
	return outcomeOf[T](res.RequestDigest, &got, wire.BranchCreated)
}

// copyOf is a new copy to make: of the tree at src (leaving out skip),
// named what ("workspace") in errors, recorded as res (its kind, key,
// digest, parent and provider) with the reference ref makes of the copy's
// id and time.
type copyOf[T any] struct {
	src, what string
	skip      []string
	res       store.Resource
	ref       func(id string, at time.Time) T
}

// makeCopy makes c under a fresh id with prefix and records it: the
// outcome is created, or replayed when another request with the key won
// meanwhile.
func makeCopy[T any](ctx context.Context, m *Manager, prefix string, c copyOf[T]) (outcome[T], error) {
	res := c.res
	res.ID = wire.NewID(prefix)
	res.Path = m.dir(res.Kind, res.ID)
	if err := treecopy.Copy(ctx, c.src, res.Path, c.skip...); err != nil {
		return outcome[T]{}, wire.Fault("copy "+c.what, err)
	}
	res.CreatedAt = m.opts.Store.Now()
	ref, err := json.Marshal(c.ref(res.ID, res.CreatedAt))
	if err != nil {
		os.RemoveAll(res.Path)
		return outcome[T]{}, wire.Fault("encode "+res.Kind, err)
	}
	res.Ref = ref
	return record[T](ctx, m.opts.Store, res)
}

// begin starts a keyed request for a new copy of kind, checked by check:
// it answers with the resource the key is bound to, when it is (done).
func begin[T any](ctx context.Context, m *Manager, kind, key, digest string, check error) (o outcome[T], done bool, err error) {
	if check != nil {
		return o, true, check
	}
	if err := m.CheckCopies(); err != nil {
		return o, true, err
	}
	return bound[T](ctx, m.opts.Store, kind, key, digest, wire.BranchReplayed)
}

// rfc3339 is how the references write a time.
func rfc3339(t time.Time) string { return t.UTC().Format(time.RFC3339Nano) }

// sameJSON says whether stored JSON and v have one canonical form.
func sameJSON(stored []byte, v any) bool {
	var generic any
	if json.Unmarshal(stored, &generic) != nil {
		return false
	}
	a, errA := wire.Digest(generic)
	b, errB := wire.Digest(v)
	return errA == nil && errB == nil && a == b
}

func ptr[T any](v T) *T { return &v }
