package conformance

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/tangle-network/boxctl/internal/routerstub"
	"github.com/tangle-network/boxctl/provider/sandbox"
)

// What the local model endpoint answers.
const (
	// ReplyText is the text of every plain turn.
	ReplyText = "Hello from the conformance suite's local model endpoint."
	// ToolDoneText is the reply after a tool ran.
	ToolDoneText = "The conformance command ran."
	// ServedModel is the model every answer names as the one that served it.
	ServedModel = "conformance-served-model"
)

// Prompt markers: the local endpoint picks its reply by them; to a real
// model they read as part of an ordinary instruction.
const (
	markerStall = "[conformance:stall]"
	markerTool  = "[conformance:tool:"
	// markerChaos + "<ms>]" asks for a paced reply held back <ms> first.
	markerChaos = "[conformance:chaos:"
)

// Prompts of the cases.
const (
	plainPrompt = "Reply with one short, friendly sentence."
	stallPrompt = markerStall + " Write a very long and detailed essay, several thousand words, on the history of shipping containers."
)

// toolPrompt asks the harness to run command with its shell tool.
func toolPrompt(h Harness, command string) string {
	return markerTool + h.Name() + "] Run exactly this shell command with your " + h.tool.Name +
		" tool, then say that it ran: `" + command + "`"
}

// chaosMarkerRE finds the hold of a chaosPrompt.
var chaosMarkerRE = regexp.MustCompile(`\[conformance:chaos:([0-9]+)\]`)

// chaosText is the reply of a chaos turn.
const chaosText = "Shipping containers changed trade: one box, one size, cranes that fit it, ships built around it, ports rebuilt for it, and costs that fell until distance hardly mattered."

// toolMarkerRE finds the harness and the command of a toolPrompt.
var toolMarkerRE = regexp.MustCompile(`\[conformance:tool:([a-z0-9-]+)\][^` + "`" + `]*` + "`([^`]+)`")

// Local is the suite's offline world: the local model endpoint (package
// routerstub) and a small git repository, served on one listener where
// the boxes reach it. Close stops both.
type Local struct {
	// Router is the endpoint with its key, as boxes reach it.
	Router sandbox.Router
	// Repo is the served repository, for the box.clone case.
	Repo *Repo

	stub *routerstub.Server
	srv  *http.Server
	done chan struct{}
}

// StartLocal serves the local model endpoint and the repository on host
// (any free port): an address every box of the target reaches, such as
// docker.Vendor.HostAddress.
func StartLocal(host string) (*Local, error) {
	var b [24]byte
	_, _ = rand.Read(b[:])
	key := "conformance-" + hex.EncodeToString(b[:])
	stub, err := routerstub.New(routerstub.Options{Keys: []string{key}, ServedModel: ServedModel, Script: routerstub.ScriptFunc(pick)})
	if err != nil {
		return nil, err
	}
	l, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
	if err != nil {
		return nil, fmt.Errorf("local model endpoint: listen on %s: %w", host, err)
	}
	mux := http.NewServeMux()
	mux.Handle("/git/conformance.git/", http.StripPrefix("/git/conformance.git", newGitRepo()))
	mux.Handle("/", stub)
	base := "http://" + l.Addr().String()
	lo := &Local{Router: sandbox.Router{URL: base, Key: key}, stub: stub, done: make(chan struct{}),
		srv:  &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second},
		Repo: &Repo{URL: base + "/git/conformance.git/", GitRef: repoTag, File: repoFile, Content: repoFirst}}
	go func() {
		defer close(lo.done)
		_ = lo.srv.Serve(l)
	}()
	return lo, nil
}

// Close stops serving: held answers (stalls) end, and Close returns once
// the server stopped.
func (l *Local) Close() error {
	err := l.srv.Close()
	<-l.done
	if errors.Is(err, http.ErrServerClosed) {
		return nil
	}
	return err
}

// sawPrompt reports whether a model request whose last user message holds
// s has arrived.
func (l *Local) sawPrompt(s string) bool {
	for _, r := range l.stub.Requests() {
		if !r.Side && strings.Contains(r.Prompt, s) {
			return true
		}
	}
	return false
}

// request returns the body of the last main-conversation model request
// whose last user message holds s.
func (l *Local) request(s string) (string, bool) {
	reqs := l.stub.Requests()
	for i := len(reqs) - 1; i >= 0; i-- {
		if r := reqs[i]; !r.Side && strings.Contains(r.Prompt, s) {
			return string(r.Body), true
		}
	}
	return "", false
}

// modelCalls counts the main-conversation model requests whose last user
// message holds s.
func (l *Local) modelCalls(s string) int {
	n := 0
	for _, r := range l.stub.Requests() {
		if !r.Side && r.Authorized && strings.Contains(r.Prompt, s) {
			n++
		}
	}
	return n
}

// modelCallsWith counts the main-conversation model requests whose last
// user message holds every one of all and none of not.
func (l *Local) modelCallsWith(all []string, not ...string) int { return l.stub.Prompts(all, not...) }

// waitPrompt waits until the endpoint saw a request holding s, or ctx
// ends.
func (l *Local) waitPrompt(ctx context.Context, s string) error {
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for !l.sawPrompt(s) {
		select {
		case <-ctx.Done():
			return context.Cause(ctx)
		case <-tick.C:
		}
	}
	return nil
}

// pick is the local endpoint's script.
func pick(r routerstub.Request) routerstub.Reply {
	switch {
	case r.Side:
		return routerstub.Text("Conformance side reply.")
	case r.ToolResult:
		return routerstub.Deltas(ToolDoneText, 2)
	case strings.Contains(r.Prompt, markerStall):
		return routerstub.Stall(15 * time.Minute)
	}
	if m := chaosMarkerRE.FindStringSubmatch(r.Prompt); m != nil {
		ms, _ := strconv.Atoi(m[1])
		return routerstub.Deltas(chaosText, chaosTurnDeltas).Paced(chaosTurnGap).After(time.Duration(ms) * time.Millisecond)
	}
	if m := toolMarkerRE.FindStringSubmatch(r.Prompt); m != nil {
		if p, ok := profiles[m[1]]; ok {
			return routerstub.ToolCall(p.tool.Name, p.tool.call(m[2]))
		}
	}
	return routerstub.Deltas(ReplyText, 4)
}
