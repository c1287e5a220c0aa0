package server

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"os"
	"path/filepath"

	"github.com/tangle-network/boxctl/bridge/store"
	"github.com/tangle-network/boxctl/bridge/wire"
	"github.com/tangle-network/boxctl/internal/treecopy"
)

// Workspace branching. A checkpoint copies the workspace of an ended run
// (its session's cwd, else the bridge's working directory) into
// <DataDir>/workspaces/checkpoints/<id>; a fork copies a checkpoint into
// <DataDir>/workspaces/forks/<id>, a workspace a new session can take as
// its cwd. Each is bound to its idempotency key and request digest in the
// store before it is answered, and a checkpoint cannot be deleted while
// a fork made from it lives.

func (s *Server) branchDir(kind, id string) string {
	return filepath.Join(s.opts.DataDir, "workspaces", kind+"s", id)
}

// branchRequest reads a strict JSON body into v and checks that digest is
// Digest of material; it has answered when ok is false.
func (s *Server) branchRequest(w http.ResponseWriter, r *http.Request, v any) bool {
	body, ok := s.readBody(w, r)
	if !ok {
		return false
	}
	if _, err := decodeStrict(body, v); err != nil {
		writeError(w, wire.TypeInvalidRequest, "invalid request: "+err.Error())
		return false
	}
	return true
}

// checkDigest answers a 400 and returns false unless digest is the digest
// of material.
func checkDigest(w http.ResponseWriter, digest string, material any, what string) bool {
	want, err := wire.Digest(material)
	if err == nil && want != digest {
		err = errors.New(what + " requestDigest does not match its content")
	}
	if err != nil {
		writeError(w, wire.TypeInvalidRequest, err.Error())
		return false
	}
	return true
}

// validRecord checks an optional JSON object field.
func validRecord(raw json.RawMessage) bool {
	if len(raw) == 0 {
		return true
	}
	var m map[string]any
	return json.Unmarshal(raw, &m) == nil && m != nil
}

// workspaceOf is the directory the run worked in.
func (s *Server) workspaceOf(ctx context.Context, run store.Run) (string, error) {
	rs, err := s.opts.Engine.Store().GetSession(ctx, run.SessionID)
	if err == nil {
		var create wire.SessionCreateRequest
		if json.Unmarshal(rs.Request, &create) == nil && create.Cwd != nil {
			return *create.Cwd, nil
		}
	} else if !errors.Is(err, store.ErrNotFound) {
		return "", err
	}
	return os.Getwd()
}

func (s *Server) createCheckpoint(w http.ResponseWriter, r *http.Request) {
	if s.opts.DataDir == "" {
		writeError(w, wire.TypeNotConfigured, "the bridge has no data directory to keep workspace copies in")
		return
	}
	var req wire.CheckpointRequest
	if !s.branchRequest(w, r, &req) {
		return
	}
	if err := validKeyed(req.IdempotencyKey, req.RequestDigest); err != nil {
		writeError(w, wire.TypeInvalidRequest, err.Error())
		return
	}
	if err := wire.ValidRunRef(req.Source); err != nil {
		writeError(w, wire.TypeInvalidRequest, "source: "+err.Error())
		return
	}
	if !validRecord(req.Metadata) {
		writeError(w, wire.TypeInvalidRequest, "metadata must be an object")
		return
	}
	if !checkDigest(w, req.RequestDigest, req.Material(), "checkpoint") {
		return
	}
	if s.replayed(w, r, store.KindCheckpoint, req.IdempotencyKey, req.RequestDigest, s.answerCheckpoint) {
		return
	}
	ctx := r.Context()
	st := s.opts.Engine.Store()
	run, err := st.GetRun(ctx, req.Source.RunID)
	if errors.Is(err, store.ErrNotFound) || err == nil && !runMatches(run, req.Source) {
		writeError(w, wire.TypeNotFound, "no run "+req.Source.RunID+" with these coordinates")
		return
	}
	if err != nil {
		s.serverError(w, "load run", err)
		return
	}
	if !run.Terminal() {
		writeJSON(w, http.StatusConflict, wire.CheckpointResult{Status: wire.BranchUnknown, IdempotencyKey: req.IdempotencyKey,
			RequestDigest: req.RequestDigest, Message: "run " + run.ID + " is live; checkpoint it after it ends", Retryable: ptr(true)})
		return
	}
	src, err := s.workspaceOf(ctx, run)
	if err != nil {
		s.serverError(w, "find workspace", err)
		return
	}
	id := newID("ckpt_")
	path := s.branchDir(store.KindCheckpoint, id)
	if err := treecopy.Copy(ctx, src, path, s.opts.DataDir); err != nil {
		s.serverError(w, "copy workspace", err)
		return
	}
	now := st.Now()
	ref := wire.CheckpointRef{CheckpointID: id, Provider: req.Source.Provider, Source: req.Source,
		IdempotencyKey: req.IdempotencyKey, RequestDigest: req.RequestDigest, CreatedAt: rfc3339(now), Metadata: req.Metadata}
	s.record(w, r, store.Resource{Kind: store.KindCheckpoint, IdempotencyKey: req.IdempotencyKey, RequestDigest: req.RequestDigest,
		ID: id, Provider: ref.Provider, Path: path, Ref: mustJSON(ref), CreatedAt: now}, s.answerCheckpoint)
}

// runMatches says whether a stored run is the one ref names.
func runMatches(run store.Run, ref wire.RunRef) bool {
	return run.Digest == ref.RequestDigest && run.SessionID == ref.SessionID &&
		(run.Provider == "" || run.Provider == ref.Provider) &&
		(run.EnvironmentID == "" || run.EnvironmentID == ref.EnvironmentID) &&
		(run.ExecutionID == "" || run.ExecutionID == ref.ExecutionID)
}

func validKeyed(key, digest string) error {
	if err := wire.ValidIdentifier(key); err != nil {
		return errors.New("idempotencyKey " + err.Error())
	}
	if err := wire.ValidDigest(digest); err != nil {
		return errors.New("requestDigest " + err.Error())
	}
	return nil
}

// keyed is how the resource bound to a key answers a request of digest:
// with status when the digests match and it lives (ref), conflict when
// the digests differ, not_found for a lookup of a deleted or absent one,
// unknown for a repeat of a request whose resource was deleted.
type keyed struct {
	status, existing, message string
	retryable                 *bool
	code                      int
	ref                       []byte
}

func keyedOutcome(digest string, got *store.Resource, status string) keyed {
	k := keyed{status: status, code: http.StatusOK}
	switch {
	case got == nil:
		k.status = wire.BranchNotFound
	case got.RequestDigest != digest:
		k.status, k.existing, k.code = wire.BranchConflict, got.RequestDigest, http.StatusConflict
	case !got.DeletedAt.IsZero() && status == wire.BranchFound:
		k.status = wire.BranchNotFound
	case !got.DeletedAt.IsZero():
		k.status, k.message, k.retryable, k.code = wire.BranchUnknown, got.Kind+" "+got.ID+" was deleted", ptr(false), http.StatusGone
	default:
		k.ref = got.Ref
		if status == wire.BranchCreated {
			k.code = http.StatusCreated
		}
	}
	return k
}

// decodeRef decodes a stored reference ("": none).
func decodeRef[T any](raw []byte) (*T, error) {
	if raw == nil {
		return nil, nil
	}
	v := new(T)
	return v, json.Unmarshal(raw, v)
}

func (s *Server) answerCheckpoint(w http.ResponseWriter, key, digest string, got *store.Resource, status string) {
	k := keyedOutcome(digest, got, status)
	ref, err := decodeRef[wire.CheckpointRef](k.ref)
	if err != nil {
		s.serverError(w, "decode checkpoint", err)
		return
	}
	writeJSON(w, k.code, wire.CheckpointResult{Status: k.status, IdempotencyKey: key, RequestDigest: digest, Checkpoint: ref,
		ExistingRequestDigest: k.existing, Message: k.message, Retryable: k.retryable})
}

func (s *Server) answerFork(w http.ResponseWriter, key, digest string, got *store.Resource, status string) {
	k := keyedOutcome(digest, got, status)
	env, err := decodeRef[wire.ForkedEnvironment](k.ref)
	if err != nil {
		s.serverError(w, "decode fork", err)
		return
	}
	writeJSON(w, k.code, wire.ForkResult{Status: k.status, IdempotencyKey: key, RequestDigest: digest, Environment: env,
		ExistingRequestDigest: k.existing, Message: k.message, Retryable: k.retryable})
}

// resourceAnswer answers the resource bound to a key (nil: none).
type resourceAnswer func(w http.ResponseWriter, key, digest string, got *store.Resource, status string)

func (s *Server) lookupCheckpoint(w http.ResponseWriter, r *http.Request) {
	s.lookup(w, r, store.KindCheckpoint, s.answerCheckpoint)
}

func (s *Server) lookupFork(w http.ResponseWriter, r *http.Request) {
	s.lookup(w, r, store.KindFork, s.answerFork)
}

// lookup answers the lookup of a key.
func (s *Server) lookup(w http.ResponseWriter, r *http.Request, kind string, answer resourceAnswer) {
	var req wire.OperationLookup
	if !s.branchRequest(w, r, &req) {
		return
	}
	if err := validKeyed(req.IdempotencyKey, req.RequestDigest); err != nil {
		writeError(w, wire.TypeInvalidRequest, err.Error())
		return
	}
	got, err := s.opts.Engine.Store().ResourceByKey(r.Context(), kind, req.IdempotencyKey)
	switch {
	case errors.Is(err, store.ErrNotFound):
		answer(w, req.IdempotencyKey, req.RequestDigest, nil, wire.BranchFound)
	case err != nil:
		s.serverError(w, "load "+kind, err)
	default:
		answer(w, req.IdempotencyKey, req.RequestDigest, &got, wire.BranchFound)
	}
}

// replayed answers a request whose key is bound already; it returns false
// when the key is free.
func (s *Server) replayed(w http.ResponseWriter, r *http.Request, kind, key, digest string, answer resourceAnswer) bool {
	got, err := s.opts.Engine.Store().ResourceByKey(r.Context(), kind, key)
	switch {
	case errors.Is(err, store.ErrNotFound):
		return false
	case err != nil:
		s.serverError(w, "load "+kind, err)
	default:
		answer(w, key, digest, &got, wire.BranchReplayed)
	}
	return true
}

// record records a new resource whose copy is at res.Path and answers it;
// the copy is removed when another request with the key won, or the
// record failed.
func (s *Server) record(w http.ResponseWriter, r *http.Request, res store.Resource, answer resourceAnswer) {
	got, err := s.opts.Engine.Store().AddResource(r.Context(), res)
	if err != nil {
		os.RemoveAll(res.Path)
	}
	switch {
	case errors.Is(err, store.ErrResourceExists):
		answer(w, res.IdempotencyKey, res.RequestDigest, &got, wire.BranchReplayed)
	case errors.Is(err, store.ErrNotFound): // a fork's checkpoint was deleted meanwhile
		writeError(w, wire.TypeNotFound, "checkpoint "+res.ParentID+" was deleted")
	case err != nil:
		s.serverError(w, "record "+res.Kind, err)
	default:
		answer(w, res.IdempotencyKey, res.RequestDigest, &got, wire.BranchCreated)
	}
}

func (s *Server) createFork(w http.ResponseWriter, r *http.Request) {
	if s.opts.DataDir == "" {
		writeError(w, wire.TypeNotConfigured, "the bridge has no data directory to keep workspace copies in")
		return
	}
	var req wire.ForkRequest
	if !s.branchRequest(w, r, &req) {
		return
	}
	if err := validKeyed(req.IdempotencyKey, req.RequestDigest); err != nil {
		writeError(w, wire.TypeInvalidRequest, err.Error())
		return
	}
	if !validRecord(req.Metadata) || !validRecord(req.Confidential) || !validRecord(req.Placement.ProviderMetadata) {
		writeError(w, wire.TypeInvalidRequest, "metadata, confidential and placement.providerMetadata must be objects")
		return
	}
	if !checkDigest(w, req.RequestDigest, req.Material(), "fork") {
		return
	}
	var conf struct {
		Requested bool `json:"requested"`
	}
	if len(req.Confidential) > 0 && json.Unmarshal(req.Confidential, &conf) == nil && conf.Requested {
		writeError(w, wire.TypeCapabilityDenied, "the bridge attests no confidential execution")
		return
	}
	if req.Placement.Kind != "local" {
		writeError(w, wire.TypeInvalidRequest, `a fork is placed on the bridge's own machine: placement.kind must be "local"`)
		return
	}
	if s.replayed(w, r, store.KindFork, req.IdempotencyKey, req.RequestDigest, s.answerFork) {
		return
	}
	ctx := r.Context()
	st := s.opts.Engine.Store()
	ckpt, err := st.ResourceByID(ctx, store.KindCheckpoint, req.Checkpoint.CheckpointID)
	if err == nil && (!ckpt.DeletedAt.IsZero() || !sameJSON(ckpt.Ref, req.Checkpoint)) {
		err = store.ErrNotFound
	}
	if errors.Is(err, store.ErrNotFound) {
		writeError(w, wire.TypeNotFound, "no live checkpoint "+req.Checkpoint.CheckpointID+" as the request gives it")
		return
	}
	if err != nil {
		s.serverError(w, "load checkpoint", err)
		return
	}
	id := newID("fork_")
	path := s.branchDir(store.KindFork, id)
	if err := treecopy.Copy(ctx, ckpt.Path, path); err != nil {
		s.serverError(w, "copy checkpoint", err)
		return
	}
	now := st.Now()
	env := wire.ForkedEnvironment{Provider: req.Checkpoint.Provider, EnvironmentID: id,
		SourceEnvironmentID: req.Checkpoint.Source.EnvironmentID, Source: req.Checkpoint.Source,
		SourceCheckpointID: ckpt.ID, IdempotencyKey: req.IdempotencyKey, RequestDigest: req.RequestDigest,
		CreatedAt: rfc3339(now), Placement: req.Placement, Metadata: req.Metadata}
	s.record(w, r, store.Resource{Kind: store.KindFork, IdempotencyKey: req.IdempotencyKey, RequestDigest: req.RequestDigest,
		ID: id, ParentID: ckpt.ID, Provider: env.Provider, Path: path, Ref: mustJSON(env), CreatedAt: now}, s.answerFork)
}

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

func (s *Server) getFork(w http.ResponseWriter, r *http.Request) {
	got, err := s.opts.Engine.Store().ResourceByID(r.Context(), store.KindFork, r.PathValue("id"))
	if err == nil && !got.DeletedAt.IsZero() {
		err = store.ErrNotFound
	}
	if errors.Is(err, store.ErrNotFound) {
		writeError(w, wire.TypeNotFound, "no live fork "+r.PathValue("id"))
		return
	}
	if err != nil {
		s.serverError(w, "load fork", err)
		return
	}
	var out wire.ForkWorkspace
	if err := json.Unmarshal(got.Ref, &out.Environment); err != nil {
		s.serverError(w, "decode fork", err)
		return
	}
	out.Path = got.Path
	writeJSON(w, http.StatusOK, out)
}

func (s *Server) deleteCheckpoint(w http.ResponseWriter, r *http.Request) {
	s.cleanup(w, r, store.KindCheckpoint)
}

func (s *Server) destroyFork(w http.ResponseWriter, r *http.Request) { s.cleanup(w, r, store.KindFork) }

// cleanup deletes a checkpoint or destroys a fork. The operation id is
// bound to its target first, so a repeat of it confirms the target absent
// and a changed request under it is a conflict.
func (s *Server) cleanup(w http.ResponseWriter, r *http.Request, kind string) {
	var req wire.CleanupRequest
	if !s.branchRequest(w, r, &req) {
		return
	}
	for _, f := range []struct{ name, v string }{{"operationId", req.OperationID}, {"targetId", req.TargetID}, {"provider", req.Provider}} {
		if err := wire.ValidIdentifier(f.v); err != nil {
			writeError(w, wire.TypeInvalidRequest, f.name+" "+err.Error())
			return
		}
	}
	if req.Kind != kind {
		writeError(w, wire.TypeInvalidRequest, "kind must be "+kind+" on this route")
		return
	}
	if !checkDigest(w, req.RequestDigest, req.Material(), "cleanup") {
		return
	}
	ack := wire.CleanupAck{OperationID: req.OperationID, Kind: req.Kind, TargetID: req.TargetID, Provider: req.Provider,
		RequestDigest: req.RequestDigest}
	ctx := r.Context()
	st := s.opts.Engine.Store()
	bound, err := st.BindCleanup(ctx, req.OperationID, kind, req.RequestDigest)
	if errors.Is(err, store.ErrCleanupConflict) {
		ack.Status, ack.ExistingRequestDigest = wire.CleanupConflict, bound
		ack.Message = "operation " + req.OperationID + " is bound to a different cleanup"
		writeJSON(w, http.StatusConflict, ack)
		return
	}
	if err != nil {
		s.serverError(w, "bind cleanup", err)
		return
	}
	got, err := st.ResourceByID(ctx, kind, req.TargetID)
	if errors.Is(err, store.ErrNotFound) || err == nil && (got.Provider != req.Provider || !got.DeletedAt.IsZero()) {
		ack.Status = wire.CleanupAlreadyAbsent
		writeJSON(w, http.StatusOK, ack)
		return
	}
	if err != nil {
		s.serverError(w, "load "+kind, err)
		return
	}
	deleted, blocking, err := st.DeleteResource(ctx, kind, req.TargetID)
	switch {
	case errors.Is(err, store.ErrInUse):
		ack.Status, ack.BlockingTargetIDs = wire.CleanupInUse, blocking
		ack.Message = "forks made from checkpoint " + req.TargetID + " must be destroyed first"
		writeJSON(w, http.StatusConflict, ack)
		return
	case err != nil:
		s.serverError(w, "delete "+kind, err)
		return
	}
	ack.Status = wire.CleanupAlreadyAbsent
	if deleted {
		ack.Status = wire.CleanupDeleted
		if err := os.RemoveAll(got.Path); err != nil {
			s.log.Error("remove workspace copy", "kind", kind, "id", got.ID, "err", err)
		}
	}
	writeJSON(w, http.StatusOK, ack)
}

func (s *Server) serverError(w http.ResponseWriter, what string, err error) {
	s.log.Error(what, "err", err)
	writeError(w, wire.TypeServerError, what)
}

func ptr[T any](v T) *T { return &v }
