package inspector

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"

	"github.com/tangle-network/boxctl/bridge/wire"
	"github.com/tangle-network/boxctl/cmd/boxctl/internal/boxstate"
	"github.com/tangle-network/boxctl/provider"
	"github.com/tangle-network/boxctl/provider/sandbox"
	"github.com/tangle-network/boxctl/provider/sandbox/broker"
	"github.com/tangle-network/boxctl/vendors"
)

// The stable error types of the inspector's API.
const (
	// TypeUnauthenticated: no valid session cookie (401).
	TypeUnauthenticated = "unauthenticated"
	// TypeInvalidToken: a URL token that is wrong or already used (401).
	TypeInvalidToken = "invalid_token"
	// TypeBadHost: a Host header the server does not answer for (403).
	TypeBadHost = "bad_host"
	// TypeBadOrigin: a state-changing request from another origin (403).
	TypeBadOrigin = "bad_origin"
	// TypeBadCSRF: a state-changing request without the session's CSRF
	// token (403).
	TypeBadCSRF = "bad_csrf"
	// TypeInvalidRequest: a malformed body, parameter or path (400).
	TypeInvalidRequest = "invalid_request"
	// TypeNotFound: no such box, run, interaction or page (404).
	TypeNotFound = "not_found"
	// TypeMethodNotAllowed: the route exists for other methods (405).
	TypeMethodNotAllowed = "method_not_allowed"
	// TypeBoxGone: the state names the box, the vendor no longer has it (410).
	TypeBoxGone = "box_gone"
	// TypeExpired: the bridge no longer retains what was asked (410).
	TypeExpired = "expired"
	// TypeConflict: a run does not bind, or the box is not in the state
	// the request needs (409).
	TypeConflict = "conflict"
	// TypeBusy: the box runs a turn, so it takes no other and is not
	// suspended (409).
	TypeBusy = "session_busy"
	// TypeNotSuspendable: the box cannot be suspended or resumed (made
	// without a retention, or on a vendor that does not suspend) (409).
	TypeNotSuspendable = "not_suspendable"
	// TypeNotLost: a replace of a box its vendor still has (409).
	TypeNotLost = "not_lost"
	// TypeNoReplica: a replace of a lost box whose sessions no broker's
	// replica holds (a box made without a broker, or one that keeps no
	// replica) (409).
	TypeNoReplica = "no_replica"
	// TypeNoRouter: a resume needs the model Router's environment
	// (TANGLE_ROUTER_URL, TANGLE_API_KEY), which the server lacks (503).
	TypeNoRouter = "no_router"
	// TypeUnavailable: the server is shutting down (503).
	TypeUnavailable = "unavailable"
	// TypeUpstream: the vendor, the bridge or the trace store failed (502).
	TypeUpstream = "upstream_error"
)

// Error is an error of the inspector's API: its HTTP status, stable type
// and message, answered as {"error":{"type","message","status"}}.
type Error struct {
	Status  int    `json:"status"`
	Type    string `json:"type"`
	Message string `json:"message"`
}

func (e *Error) Error() string { return e.Type + ": " + e.Message }

func errorf(status int, typ, msg string) *Error {
	return &Error{Status: status, Type: typ, Message: msg}
}

// ErrorResponse is the body of an error answer.
type ErrorResponse struct {
	Error *Error `json:"error"`
}

// apiError maps err to the API error a caller sees.
func apiError(err error) *Error {
	var (
		ae       *Error
		noBox    *boxstate.NoBoxError
		argErr   *boxstate.ArgError
		conflict *provider.ConflictError
		notFound *provider.NotFoundError
		expired  *provider.ExpiredCursorError
		mismatch *provider.IdentityMismatchError
		noRouter *sandbox.MissingRouterEnvError
	)
	switch {
	case errors.As(err, &ae):
		return ae
	case errors.As(err, &noBox):
		return errorf(http.StatusNotFound, TypeNotFound, err.Error())
	case errors.As(err, &argErr):
		return errorf(http.StatusBadRequest, TypeInvalidRequest, err.Error())
	case errors.Is(err, vendors.ErrNotFound):
		return errorf(http.StatusGone, TypeBoxGone, err.Error())
	case errors.As(err, &conflict) && conflict.Type == wire.TypeSessionBusy:
		return errorf(http.StatusConflict, TypeBusy, err.Error())
	case errors.Is(err, sandbox.ErrNotLost):
		return errorf(http.StatusConflict, TypeNotLost, err.Error())
	case errors.Is(err, broker.ErrNoReplica), errors.Is(err, broker.ErrUnknownBox):
		return errorf(http.StatusConflict, TypeNoReplica, err.Error())
	case errors.Is(err, vendors.ErrNotSuspendable):
		return errorf(http.StatusConflict, TypeNotSuspendable, err.Error())
	case errors.As(err, &noRouter):
		return errorf(http.StatusServiceUnavailable, TypeNoRouter, err.Error())
	case errors.As(err, &conflict), errors.As(err, &mismatch):
		return errorf(http.StatusConflict, TypeConflict, err.Error())
	case errors.As(err, &notFound):
		return errorf(http.StatusNotFound, TypeNotFound, err.Error())
	case errors.As(err, &expired):
		return errorf(http.StatusGone, TypeExpired, err.Error())
	case errors.Is(err, context.Canceled), errors.Is(err, errClosed):
		return errorf(http.StatusServiceUnavailable, TypeUnavailable, err.Error())
	}
	return errorf(http.StatusBadGateway, TypeUpstream, err.Error())
}

// writeError answers err as its API error.
func writeError(w http.ResponseWriter, err error) {
	ae := apiError(err)
	writeJSON(w, ae.Status, ErrorResponse{Error: ae})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}
