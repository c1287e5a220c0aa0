package routerstub

import (
	"cmp"
	"context"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/tangle-network/boxctl/internal/modelapi"
)

// Server is the local model endpoint. It is an http.Handler: mount it in an
// httptest.Server, or run it with Serve.
type Server struct {
	opts options
	log  requestLog
}

// Options configures a Server. A Server needs at least one of Keys, or
// NoAuth; every other field has a default.
type Options struct {
	// Keys are the keys the server accepts, in `x-api-key` or
	// `Authorization: Bearer` on any path.
	Keys []string
	// NoAuth makes the server accept requests with any key or none.
	// Requests are still recorded with what they presented.
	NoAuth bool
	// Script picks the replies. Default: NewQueue(Text("OK")).
	Script Script
	// ServedModel, when set, is the model every answer names as the one
	// that served it, whatever the request named.
	ServedModel string
	// ModelMapping maps the requested model to the served one (not with
	// ServedModel). Default: the identity.
	ModelMapping func(requested string) string
	// SideCalls marks a request as a side call (see Queue). Default:
	// IsSideCall.
	SideCalls func(Request) bool
	// Logger gets each request at debug level, without its key. Default:
	// nothing is logged.
	Logger *slog.Logger
}

// options are Options with the defaults filled in.
type options struct {
	keys     []string
	noAuth   bool
	script   Script
	served   func(requested string) string
	side     func(Request) bool
	logger   *slog.Logger
	maxBytes int64
}

// ErrNoKey means New was given neither Keys nor NoAuth.
var ErrNoKey = errors.New("routerstub: no key given (set Options.Keys or Options.NoAuth)")

func makeOptions(in Options) (options, error) {
	o := options{
		keys:     in.Keys,
		noAuth:   in.NoAuth,
		script:   in.Script,
		served:   func(m string) string { return m },
		side:     IsSideCall,
		logger:   cmp.Or(in.Logger, slog.New(slog.DiscardHandler)),
		maxBytes: 64 << 20,
	}
	switch {
	case in.ServedModel != "" && in.ModelMapping != nil:
		return options{}, errors.New("routerstub: ServedModel and ModelMapping both set")
	case in.ServedModel != "":
		o.served = func(string) string { return in.ServedModel }
	case in.ModelMapping != nil:
		o.served = in.ModelMapping
	}
	if o.script == nil {
		o.script = NewQueue(Text("OK"))
	}
	if in.SideCalls != nil {
		o.side = in.SideCalls
	}
	for _, k := range o.keys {
		if k == "" {
			return options{}, errors.New("routerstub: empty key")
		}
	}
	if len(o.keys) == 0 && !o.noAuth {
		return options{}, ErrNoKey
	}
	return o, nil
}

// New returns a Server configured by o.
func New(o Options) (*Server, error) {
	opts, err := makeOptions(o)
	if err != nil {
		return nil, err
	}
	return &Server{opts: opts}, nil
}

// Requests returns a copy of every request recorded so far, in arrival
// order, including unauthorized ones and those on unknown paths.
func (s *Server) Requests() []Request { return s.log.snapshot() }

// Prompts counts the authorized main-conversation requests (not side
// requests) whose prompt holds every one of all and none of not.
func (s *Server) Prompts(all []string, not ...string) int {
	n := 0
next:
	for _, r := range s.Requests() {
		if r.Side || !r.Authorized {
			continue
		}
		for _, p := range all {
			if !strings.Contains(r.Prompt, p) {
				continue next
			}
		}
		for _, p := range not {
			if strings.Contains(r.Prompt, p) {
				continue next
			}
		}
		n++
	}
	return n
}

// Serve answers connections on l until ctx ends, then stops: requests in
// flight (a Stall, say) see their context end, and Serve returns after they
// finish or five seconds pass. It returns nil after ctx ends.
func (s *Server) Serve(ctx context.Context, l net.Listener) error {
	hs := &http.Server{
		Handler:           s,
		ReadHeaderTimeout: 10 * time.Second,
		BaseContext:       func(net.Listener) context.Context { return ctx },
		ErrorLog:          slog.NewLogLogger(s.opts.logger.Handler(), slog.LevelDebug),
	}
	errc := make(chan error, 1)
	go func() { errc <- hs.Serve(l) }()
	select {
	case err := <-errc:
		return fmt.Errorf("serve model endpoint: %w", err)
	case <-ctx.Done():
	}
	shutCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	if err := hs.Shutdown(shutCtx); err != nil {
		_ = hs.Close()
	}
	<-errc
	return nil
}

// ServeHTTP records the request, checks its key and answers it.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	in := s.record(w, r)
	defer func() { s.opts.logger.Debug("model request", "request", s.snapshot(in.rec)) }()
	if !s.admit(w, r, in) {
		return
	}
	if in.count {
		s.countTokens(w, in)
		return
	}
	s.answer(w, r, in)
}

// incoming is a request as ServeHTTP read it.
type incoming struct {
	// rec is the request's record in the log.
	rec *Request
	// family is the request's API family; count reports a token-count
	// call.
	family Family
	count  bool
	// body is the request's body, and wire what it holds; parseErr is
	// why the body could not be read or parsed.
	body     []byte
	wire     wireRequest
	parseErr error
}

// record reads r (its route, key and body) and adds its record to the
// log.
func (s *Server) record(w http.ResponseWriter, r *http.Request) incoming {
	family, count := modelapi.Route(r.Method, r.URL.Path)
	kind, key := modelapi.PresentedKey(r)
	if kind == modelapi.AuthGoogQuery {
		kind = AuthGoogAPIKey
	}
	rec := &Request{
		Time: time.Now(), Method: r.Method, Path: r.URL.Path, Query: r.URL.RawQuery,
		UserAgent: r.UserAgent(), Family: family, AuthKind: kind, Key: key,
		Authorized: s.authorized(key),
	}
	body, readErr := io.ReadAll(http.MaxBytesReader(w, r.Body, s.opts.maxBytes))
	rec.Body = body
	in := incoming{rec: rec, family: family, count: count, body: body, parseErr: readErr}
	if in.parseErr == nil && family != FamilyNone {
		in.parseErr = json.Unmarshal(body, &in.wire)
		inspect(family, &in.wire, rec)
		if family == FamilyGemini && in.parseErr == nil {
			in.parseErr = inspectGemini(r.URL.Path, body, &in.wire, rec)
		}
	}
	s.log.add(rec)
	return in
}

// admit answers the error of a request that is not to be served (an
// unknown path, a missing or wrong key, a body that is not a request) in
// the shape of its API family, and reports whether it is to be served.
func (s *Server) admit(w http.ResponseWriter, r *http.Request, in incoming) bool {
	rec, family := in.rec, in.family
	errFamily := family
	if family == FamilyNone && (r.Header.Get("Anthropic-Version") != "" || rec.AuthKind == AuthAPIKey) {
		errFamily = FamilyAnthropic
	}
	fail := func(status int, code, msg string) bool {
		s.log.update(rec, func(r *Request) { r.Status = status })
		writeError(w, errFamily, status, code, msg, false)
		return false
	}
	switch {
	case family == FamilyNone:
		return fail(http.StatusNotFound, "unknown_url", fmt.Sprintf("Unknown request URL: %s %s.", r.Method, r.URL.Path))
	case !rec.Authorized && rec.Key == "":
		return fail(http.StatusUnauthorized, "", missingKeyMessage(family))
	case !rec.Authorized:
		return fail(http.StatusUnauthorized, "invalid_api_key", invalidKeyMessage(family))
	case in.parseErr != nil:
		return fail(http.StatusBadRequest, "", "Could not parse the JSON body of your request.")
	case in.wire.Model == "":
		return fail(http.StatusBadRequest, "", "model: Field required")
	}
	return true
}

// countTokens answers a token-count call with the body's input tokens.
func (s *Server) countTokens(w http.ResponseWriter, in incoming) {
	input := tokens(string(in.body))
	s.log.update(in.rec, func(r *Request) {
		r.Status, r.Reply, r.Usage = http.StatusOK, "count_tokens", Usage{InputTokens: input}
	})
	if in.family == FamilyGemini {
		writeJSON(w, http.StatusOK, map[string]int{"totalTokens": input})
		return
	}
	writeJSON(w, http.StatusOK, map[string]int{"input_tokens": input})
}

// answer picks the script's reply to the request and answers it, after
// the reply's delay, in the shape of its API family.
func (s *Server) answer(w http.ResponseWriter, r *http.Request, in incoming) {
	rec, family, wr := in.rec, in.family, in.wire
	served := s.opts.served(wr.Model)
	s.log.update(rec, func(r *Request) {
		r.ServedModel = served
		r.Side = s.opts.side(*r)
	})
	snap := s.snapshot(rec)
	reply := conforming(s.opts.script.Pick(snap), snap.Schema)
	s.log.update(rec, func(r *Request) { r.Reply = reply.String() })

	t := &turn{
		seq: rec.Seq, model: served, reply: reply, stream: wr.Stream,
		usage:        Usage{InputTokens: tokens(string(in.body)), OutputTokens: reply.outputTokens()},
		includeUsage: wr.StreamOptions != nil && wr.StreamOptions.IncludeUsage,
		sse:          newSSE(w),
	}
	if !sleep(r.Context(), reply.delay) {
		s.log.update(rec, func(r *Request) { r.Status = StatusClientGone })
		return
	}
	if e := reply.err; e != nil {
		s.log.update(rec, func(r *Request) { r.Status = e.status })
		writeError(w, family, e.status, "", e.message, e.retry)
		return
	}
	// Recorded before rendering: a Stall never returns from it.
	s.log.update(rec, func(r *Request) { r.Status, r.Usage = http.StatusOK, t.usage })
	if family == FamilyResponses || family == FamilyChat {
		// The OpenAI API names the model that served a request in this
		// header as well as in the body.
		w.Header().Set(OpenAIModelHeader, served)
	}
	switch family {
	case FamilyAnthropic:
		anthropicAnswer(r.Context(), t)
	case FamilyResponses:
		responsesAnswer(r.Context(), t)
	case FamilyChat:
		chatAnswer(r.Context(), t)
	case FamilyGemini:
		geminiAnswer(r.Context(), t)
	}
}

// OpenAIModelHeader is the response header in which OpenAI answers
// (Responses and Chat Completions) name the served model.
const OpenAIModelHeader = "Openai-Model"

// StatusClientGone is recorded as a request's status when the client went
// away before the answer started (as during an After delay).
const StatusClientGone = 499

// sleep waits d and reports true, or false if ctx ends first.
func sleep(ctx context.Context, d time.Duration) bool {
	if d <= 0 {
		return ctx.Err() == nil
	}
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-timer.C:
		return true
	}
}

func (s *Server) snapshot(r *Request) Request {
	var out Request
	s.log.update(r, func(r *Request) { out = *r })
	return out
}

func (s *Server) authorized(key string) bool {
	if s.opts.noAuth {
		return true
	}
	ok := false
	for _, k := range s.opts.keys {
		if subtle.ConstantTimeCompare([]byte(k), []byte(key)) == 1 {
			ok = true
		}
	}
	return ok
}

// IsSideCall is the default side-call classifier. A side call is a request
// a CLI makes beside the conversation (a session title, a summary, a quota
// probe) rather than a step of the turn. Every step of Claude Code's main
// conversation offers tools (twelve in `claude -p` 2.1.x), its side calls
// offer none; so a Messages API request from Claude Code (User-Agent
// "claude-cli/...") that offers no tools is a side call. Codex and Pi make
// no side calls on a plain turn, and other clients are never classified,
// so a bare API request without tools still gets the queued reply.
func IsSideCall(r Request) bool {
	return r.Family == FamilyAnthropic && r.Tools == 0 &&
		strings.HasPrefix(r.UserAgent, "claude-cli/") && r.Path == "/v1/messages"
}
