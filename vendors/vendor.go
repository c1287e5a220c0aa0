package vendors

import (
	"context"
	"io"
	"net/http"
	"net/netip"
	"syscall"
	"time"

	"github.com/tangle-network/boxctl/vendors/boxmeta"
	"github.com/tangle-network/boxctl/vendors/egress"
)

// Vendor makes boxes and finds the ones it made.
type Vendor interface {
	// Name is the vendor's short name ("docker", "e2b", ...), used in
	// errors and labels.
	Name() string
	// Supports reports the create fields this vendor honours. Image,
	// Lifetime and RunTag are honoured by every vendor.
	Supports() Fields
	// Create starts a box and returns it once it runs. On an error after
	// the vendor created something, the returned error is a
	// *CleanupError naming the box when the vendor could not remove it
	// itself; otherwise nothing is left behind.
	Create(ctx context.Context, spec CreateSpec) (Box, error)
	// Connect returns the existing box id; ErrNotFound if there is none.
	Connect(ctx context.Context, id string) (Box, error)
	// List returns the boxes this vendor made (LabelManaged) whose labels
	// include every pair of filter, running or not yet removed.
	List(ctx context.Context, filter map[string]string) ([]Info, error)
}

// Box is one running box.
type Box interface {
	// ID is the vendor's id of the box; Connect takes it.
	ID() string
	// Status reports the box's state and labels.
	Status(ctx context.Context) (Info, error)
	// Exec runs a command to completion and returns its output and exit
	// status. A non-zero exit status is not an error.
	Exec(ctx context.Context, spec ExecSpec) (ExecResult, error)
	// Spawn starts a long-running process and returns as soon as it
	// runs. The process's environment (spec.Env) is given to that process
	// only: it appears in no configuration of the box the vendor exposes
	// (container inspect, exec inspect, pod spec) and in no command line.
	Spawn(ctx context.Context, spec SpawnSpec) (Process, error)
	// Read returns the content of a regular file in the box.
	Read(ctx context.Context, path string) ([]byte, error)
	// Write creates or replaces a regular file in the box (parents
	// created), owned by the box's user.
	Write(ctx context.Context, path string, data []byte, mode uint32) error
	// Endpoint returns how to reach a port the box exposes
	// (CreateSpec.Ports) from the caller's machine.
	Endpoint(ctx context.Context, port int) (Endpoint, error)
	// Process returns a process Spawn started in this box, by its ID,
	// for a caller that did not start it (or restarted): its output and
	// status remain readable after it ended, for the box's life.
	Process(ctx context.Context, id string) (Process, error)
	// Destroy ends the box and everything in it. It is idempotent: a box
	// already gone is not an error.
	Destroy(ctx context.Context) error
}

// Process is a process started with Box.Spawn.
type Process interface {
	// ID identifies the process within its box.
	ID() string
	// Output streams the process's stdout and stderr from their start,
	// following them until the process ends or ctx ends. The caller
	// closes the returned readers.
	Output(ctx context.Context) (stdout, stderr io.ReadCloser, err error)
	// Logs returns what the process printed so far on stdout and stderr,
	// without following them.
	Logs(ctx context.Context) (stdout, stderr []byte, err error)
	// Wait blocks until the process ends and returns its exit status
	// (128+n for a signal n), or until ctx ends.
	Wait(ctx context.Context) (int, error)
	// Signal sends sig to the process. A process that already ended is
	// not an error.
	Signal(ctx context.Context, sig syscall.Signal) error
}

// State is a box's life-cycle state.
type State string

// States.
const (
	StateRunning  State = "running"
	StateStopped  State = "stopped"
	StateCreating State = "creating"
	StateUnknown  State = "unknown"
)

// Info describes a box.
type Info struct {
	ID     string
	Vendor string
	State  State
	Image  string
	// Labels are the box's labels, boxmeta's included.
	Labels map[string]string
	// Created is when the box was made; Deadline when it ends (from
	// its LabelDeadline).
	Created  time.Time
	Deadline time.Time
}

// RunTag returns the box's run tag label.
func (i Info) RunTag() string { return i.Labels[boxmeta.LabelRunTag] }

// Owner returns the box's owner label.
func (i Info) Owner() string { return i.Labels[boxmeta.LabelOwner] }

// ExecSpec is a command to run to completion.
type ExecSpec struct {
	// Command is the argument vector; required.
	Command []string
	// Env is added to the box's environment for this command only.
	Env map[string]string
	// Dir is the working directory; empty means the box's.
	Dir string
	// Stdin is written to the command's standard input, then closed.
	Stdin io.Reader
	// MaxOutput caps each of stdout and stderr kept in the result.
	// Default: 16 MiB.
	MaxOutput int64
}

// ExecResult is what a finished command left.
type ExecResult struct {
	ExitCode int
	Stdout   []byte
	Stderr   []byte
}

// SpawnSpec is a long-running process to start.
type SpawnSpec struct {
	// Command is the argument vector; required.
	Command []string
	// Env is the process's own environment, added to the box's. Values
	// may be secrets: see Box.Spawn.
	Env map[string]string
	// Dir is the working directory; empty means the box's.
	Dir string
	// Name is the process's ID in the box: letters, digits, '-', '_'.
	// Empty means a random one. A name already used in the box is an
	// error.
	Name string
}

// Endpoint is how to reach a box's port.
type Endpoint struct {
	// URL is the base URL (scheme, host, port) of the port.
	URL string
	// Header holds headers every request must carry (a vendor proxy's
	// token); nil when none. Values are secrets.
	Header http.Header
	// Transport carries requests when the vendor needs its own (a tunnel);
	// nil means an ordinary one.
	Transport http.RoundTripper
}

// Shared returns e with a transport of its own fixed (a clone of
// http.DefaultTransport when it has none), so that the clients of the copy
// share one pool of connections: a request that follows another reuses
// its connection rather than dialing again. Whoever holds the last client
// closes its idle connections.
func (e Endpoint) Shared() Endpoint {
	if e.Transport == nil {
		e.Transport = http.DefaultTransport.(*http.Transport).Clone()
	}
	return e
}

// Client returns an HTTP client for the endpoint: Transport (or a clone
// of http.DefaultTransport) with Header added to every request. The client
// has no overall timeout; streams are long-lived.
func (e Endpoint) Client() *http.Client {
	rt := e.Transport
	if rt == nil {
		rt = http.DefaultTransport.(*http.Transport).Clone()
	}
	if len(e.Header) > 0 {
		rt = headerTransport{rt: rt, header: e.Header}
	}
	return &http.Client{Transport: rt}
}

type headerTransport struct {
	rt     http.RoundTripper
	header http.Header
}

func (h headerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	for k, vs := range h.header {
		r.Header[k] = append([]string(nil), vs...)
	}
	return h.rt.RoundTrip(r)
}

// CloseIdleConnections lets http.Client.CloseIdleConnections reach the
// wrapped transport.
func (h headerTransport) CloseIdleConnections() {
	if c, ok := h.rt.(interface{ CloseIdleConnections() }); ok {
		c.CloseIdleConnections()
	}
}

// Addressed is a box whose vendor can tell the address its traffic comes
// from as a server on the host (HostAddress) sees it: a credential broker
// binds the box's token to it, so that another box presenting the token
// is refused.
type Addressed interface {
	// Address returns the box's address on the boxes' network.
	Address(ctx context.Context) (netip.Addr, error)
}

// Deadlined is a box whose handle knows the deadline its vendor set when
// the handle was made (by a create): a caller that needs only the
// deadline asks no Status of the vendor.
type Deadlined interface {
	// KnownDeadline returns that deadline; false when the handle does
	// not know it (a Connect).
	KnownDeadline() (time.Time, bool)
}

// EgressEnforcer is a vendor that enforces a box's egress policy itself,
// outside the box, with rules of its own (E2B's network rules, Daytona's
// allow list): boxctl runs no gate for its boxes, and tells it what the
// box may reach, the broker among it.
type EgressEnforcer interface {
	// EgressRules says what the vendor's rules can express.
	EgressRules() EgressRules
}

// EgressRules is what a vendor's egress rules can express beside IPv4
// addresses and CIDRs: a domain (matched on ports 80 and 443), a port on
// an address rule.
type EgressRules struct {
	Domains, Ports bool
	// MaxRules bounds how many rules a box's policy may hold, the
	// broker's among them; 0: no bound.
	MaxRules int
	// Relay: the vendor's rules let a box reach a relay and resolver of
	// the caller's (a gate without a bridge, package egress/gate), which
	// holds its domain rules: the caller gives that gate each box's
	// policy by the box's address (Addressed). Kubernetes.
	Relay bool
}

// EgressBlocks is a box whose vendor's rules (a Kubernetes
// NetworkPolicy) can be read back as they hold: what the box may reach by
// address, and on which ports.
type EgressBlocks interface {
	EgressBlocks(ctx context.Context) ([]EgressBlock, error)
}

// EgressBlock is one range of addresses a box may reach: Prefix but
// Except, on Ports ("tcp/443", "udp/53"; "tcp" for every TCP port).
type EgressBlock struct {
	Prefix netip.Prefix
	Except []netip.Prefix
	Ports  []string
}

// Reaches reports whether the block lets the box reach a.
func (b EgressBlock) Reaches(a netip.Addr) bool {
	if !b.Prefix.Contains(a) {
		return false
	}
	for _, e := range b.Except {
		if e.Contains(a) {
			return false
		}
	}
	return true
}

// EgressSetter is a box whose vendor enforces its egress policy itself,
// outside the box (E2B's network rules), and changes it while the box
// runs.
type EgressSetter interface {
	// SetEgress replaces the box's policy (not Open); it holds when
	// SetEgress returns.
	SetEgress(ctx context.Context, p egress.Policy) error
}
