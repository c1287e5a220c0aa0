package provider

import (
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/tangle-network/boxctl/bridge/wire"
)

// DefaultName is the provider name used when Options.Name is empty. It is
// a coordinate of every ControlRef, so a process that re-attaches to a run
// must use the same name.
const DefaultName = "cli-bridge"

// DefaultCancelWait is how long a cancellation waits for the bridge to
// confirm a terminal run when Options.CancelWait is zero.
const DefaultCancelWait = 30 * time.Second

// Options configures a Provider. Only BaseURL is required; every zero value
// means the documented default.
type Options struct {
	// BaseURL is the bridge's root URL, e.g. http://127.0.0.1:3344.
	BaseURL string
	// BearerToken is sent as `Authorization: Bearer` on every request. It is
	// never logged nor included in an error.
	BearerToken string
	// DefaultModel is the bridge model used when a turn names none, e.g.
	// "claude-code/sonnet". Default: none (the profile's model is used).
	DefaultModel string
	// DefaultExecution is the bridge `execution` object, forwarded
	// unchanged on every turn. Default: none (the bridge's own default).
	DefaultExecution *Execution
	// HeadersTimeout bounds the wait for response headers. Default: none.
	HeadersTimeout time.Duration
	// BodyTimeout bounds the idle time between two reads of a response
	// body, streams included. Default: none; set it (or use a context) for
	// unattended runs so a silent bridge cannot hold a reader forever.
	BodyTimeout time.Duration
	// CancelWait bounds the wait for a cancellation to be confirmed
	// terminal. Default: DefaultCancelWait.
	CancelWait time.Duration
	// HTTPClient sends the requests. Default: a client with no overall
	// timeout (streams are long-lived) over a clone of
	// http.DefaultTransport.
	HTTPClient *http.Client
	// Name is the provider coordinate of every run. Default: DefaultName.
	Name string
	// Capabilities is a capability document the caller already discovered
	// for the same bridge; when set, no discovery request is made.
	Capabilities *Capabilities
	// Logger receives debug records of requests (never their credentials).
	// Default: discard.
	Logger *slog.Logger
}

func (o Options) normalized() (Options, error) {
	if o.BaseURL == "" {
		return o, errors.New("provider options: BaseURL is required")
	}
	u, err := url.Parse(o.BaseURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return o, errors.New("provider options: BaseURL must be an absolute http or https URL")
	}
	o.BaseURL = strings.TrimRight(o.BaseURL, "/")
	for name, d := range map[string]time.Duration{"HeadersTimeout": o.HeadersTimeout, "BodyTimeout": o.BodyTimeout, "CancelWait": o.CancelWait} {
		if d < 0 {
			return o, fmt.Errorf("provider options: %s must not be negative", name)
		}
	}
	if o.CancelWait == 0 {
		o.CancelWait = DefaultCancelWait
	}
	if o.Name == "" {
		o.Name = DefaultName
	}
	if o.HTTPClient == nil {
		o.HTTPClient = &http.Client{Transport: http.DefaultTransport.(*http.Transport).Clone()}
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.DefaultExecution != nil {
		if k := o.DefaultExecution.Kind; k != ExecutionHost && k != ExecutionSandbox {
			return o, fmt.Errorf("provider options: DefaultExecution.Kind must be %q or %q", ExecutionHost, ExecutionSandbox)
		}
	}
	return o, nil
}

// Execution kinds.
const (
	ExecutionHost    = wire.ExecutionHost
	ExecutionSandbox = wire.ExecutionSandbox
)

// Execution is the bridge request's `execution` object: where and under
// which confinement the harness runs. The bridge validates it and applies
// its operator rules; the provider forwards it unchanged. Host execution
// uses Jail, NetJail and TimeoutMS; sandbox execution uses RepoURL, GitRef,
// Capability, TTLSeconds, NetJail and TimeoutMS. It is the wire type.
type Execution = wire.Execution

// Jail is host file-system confinement: Mode off, write-jail or fs-jail.
type Jail = wire.Jail

// NetJail is network confinement: Mode off or net-jail, with allowed hosts.
type NetJail = wire.NetJail
