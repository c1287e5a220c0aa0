package jail

import (
	"bytes"
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"strings"
	"sync"
	"time"

	"github.com/tangle-network/boxctl/bridge/wire"
)

// Mode is a file-system jail mode (wire.JailOff, wire.JailWrite,
// wire.JailFS).
type Mode = string

// Request is the confinement one turn asks for.
type Request struct {
	// Mode is the file-system jail ("" means off).
	Mode Mode
	// Root is execution.jail.root: the jailed harness's writable home,
	// relative to the project directory or absolute inside it ("" means
	// DefaultRoot).
	Root string
	// Net asks for the network jail.
	Net bool
	// Allow is the netJail.allow assertion: when not empty, it must equal
	// the enforced allow list.
	Allow []string
}

// FromWire is the Request of an execution object (nil: none).
func FromWire(e *wire.Execution) Request {
	if e == nil {
		return Request{}
	}
	r := Request{Mode: e.JailMode(), Net: e.NetJailed()}
	if e.Jail != nil {
		r.Root = e.Jail.Root
	}
	if e.NetJail != nil {
		r.Allow = e.NetJail.Allow
	}
	return r
}

// Active reports whether r asks for any confinement.
func (r Request) Active() bool { return r.fs() || r.Net }

func (r Request) fs() bool { return r.Mode == wire.JailWrite || r.Mode == wire.JailFS }

// DefaultRoot is the jail root when a request names none.
const DefaultRoot = ".agent-home"

// Reasons of an UnavailableError.
const (
	// ReasonBwrapMissing: no bwrap binary.
	ReasonBwrapMissing = "bwrap_missing"
	// ReasonNamespacesDenied: bwrap cannot create its namespaces here
	// (unprivileged user namespaces disabled, a container's seccomp
	// profile).
	ReasonNamespacesDenied = "namespaces_denied"
	// ReasonNetNamespace: bwrap makes every namespace but a network one
	// here (gVisor): the filesystem jail holds, the network jail does not.
	ReasonNetNamespace = "net_namespace_unavailable"
)

// UnavailableError is a jail this host cannot enforce. The bridge
// answers it as wire.TypeNotConfigured with Code Reason.
type UnavailableError struct {
	Reason string
	Detail string
}

func (e *UnavailableError) Error() string { return "jail unavailable: " + e.Detail }

// NetError is a network jail that cannot be put in force for a request:
// no model endpoint, one the relay cannot serve, or an allow assertion
// that differs from the enforced list. The bridge answers it as
// wire.TypeExecutorMisconfigured.
type NetError struct{ Msg string }

func (e *NetError) Error() string { return e.Msg }

// RequestError is a confinement request that cannot mean anything: a
// root outside the project directory, a project directory that is the
// whole file system or inside the bridge's data directory. The bridge
// answers it 400.
type RequestError struct{ Msg string }

func (e *RequestError) Error() string { return e.Msg }

// Options configure a Jailer. Zero values mean the defaults.
type Options struct {
	// Bwrap is the bubblewrap binary (default: bwrap on PATH).
	Bwrap string
	// DataDir is the bridge's data directory, hidden from jailed
	// harnesses (required for Prepare).
	DataDir string
	// RouterURL is the model endpoint, the one destination of a net-jailed
	// harness.
	RouterURL string
	// Relay is the executable that runs RunRelay inside a net jail when
	// called with RelayArg (default: this process's executable, whose main
	// calls ServeRelayIfAsked).
	Relay string
	// Floor is the operator's confinement floor, which every turn's
	// request is raised to (default: none).
	Floor Floor
	// ProbeTimeout bounds one availability probe (default 10 s).
	ProbeTimeout time.Duration
	// Logger receives the probe verdicts (default: discard).
	Logger *slog.Logger
}

// Jailer enforces jails on this host.
type Jailer struct {
	opts Options
	log  *slog.Logger
	// ep is the network jail's endpoint, or epErr why there is none.
	ep    *endpoint
	epErr error

	mu sync.Mutex
	// last is the verdict of the last probe (nil: available), lastNet
	// the network jail's; probed reports whether one ran.
	last, lastNet error
	probed        bool
}

// New returns a jailer. It does not probe: call Probe.
func New(opts Options) *Jailer {
	if opts.ProbeTimeout <= 0 {
		opts.ProbeTimeout = 10 * time.Second
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.Relay == "" {
		if exe, err := os.Executable(); err == nil {
			opts.Relay = exe
		}
	}
	j := &Jailer{opts: opts, log: opts.Logger}
	j.ep, j.epErr = parseEndpoint(opts.RouterURL)
	return j
}

// Probe checks that bwrap can create the namespaces a jail uses on this
// host, by running it with them, and records the verdict for Caps. The
// error is an *UnavailableError. Where bwrap can make every namespace but
// a network one (gVisor cannot bring up the loopback of a new network
// namespace), the filesystem jail holds and Probe returns nil; the
// network jail's verdict is recorded apart (Check refuses net-jail then).
func (j *Jailer) Probe(ctx context.Context) error {
	err, netErr := j.probe(ctx)
	j.mu.Lock()
	changed := !j.probed || (j.last == nil) != (err == nil) || (j.lastNet == nil) != (netErr == nil)
	j.last, j.lastNet, j.probed = err, netErr, true
	j.mu.Unlock()
	if changed {
		switch {
		case err != nil:
			j.log.Warn("jailed execution is unavailable; jailed turns are refused", "err", err)
		case netErr != nil:
			j.log.Warn("the network jail is unavailable; net-jailed turns are refused", "err", netErr)
			j.log.Info("jailed execution is available", "enforcer", "bwrap")
		default:
			j.log.Info("jailed execution is available", "enforcer", "bwrap", "net_jail_allow", j.allowList())
		}
	}
	return err
}

// probe runs bwrap with every namespace of a net jail, and when that
// fails, without the network one: the verdicts of the filesystem jail
// (err) and of the network jail (netErr).
func (j *Jailer) probe(ctx context.Context) (err, netErr error) {
	bwrap, err := j.bwrap()
	if err != nil {
		return err, err
	}
	truePath, err := exec.LookPath("true")
	if err != nil {
		err = &UnavailableError{Reason: ReasonNamespacesDenied, Detail: "no `true` binary to probe bwrap with: " + err.Error()}
		return err, err
	}
	run := func(net bool) string {
		ctx, cancel := context.WithTimeout(ctx, j.opts.ProbeTimeout)
		defer cancel()
		args := append(namespaceArgs(net), "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--", truePath)
		cmd := exec.CommandContext(ctx, bwrap, args...)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		if err := cmd.Run(); err != nil {
			if msg := strings.TrimSpace(stderr.String()); msg != "" {
				return msg
			}
			return err.Error()
		}
		return ""
	}
	netMsg := run(true)
	if netMsg == "" {
		return nil, nil
	}
	if msg := run(false); msg != "" {
		err = &UnavailableError{Reason: ReasonNamespacesDenied, Detail: "bwrap cannot create its namespaces on this host (" + msg +
			"); allow unprivileged user namespaces (sysctl kernel.unprivileged_userns_clone=1, " +
			"kernel.apparmor_restrict_unprivileged_userns=0) or run the box where they are allowed"}
		return err, err
	}
	return nil, &UnavailableError{Reason: ReasonNetNamespace, Detail: "bwrap cannot bring up a network namespace on this host (" + netMsg +
		"), though it makes the others: so it is under gVisor, whose loopback set-up in a new network namespace fails; " +
		"the filesystem jail holds, and the box's egress is confined outside it"}
}

func (j *Jailer) bwrap() (string, error) {
	name := j.opts.Bwrap
	if name == "" {
		name = "bwrap"
	}
	p, err := exec.LookPath(name)
	if err != nil {
		return "", &UnavailableError{Reason: ReasonBwrapMissing,
			Detail: fmt.Sprintf("bubblewrap (%s) is not installed: install the Debian package bubblewrap", name)}
	}
	return p, nil
}

// namespaceArgs are the bwrap arguments every jail (and the probe) runs
// with.
func namespaceArgs(net bool) []string {
	a := []string{"--die-with-parent", "--unshare-user", "--unshare-pid", "--unshare-ipc", "--unshare-uts",
		"--unshare-cgroup-try", "--cap-drop", "ALL"}
	if net {
		a = append(a, "--unshare-net")
	}
	if os.Getuid() == 0 {
		// Root is mapped to nobody inside: a jailed uid 0 without
		// capabilities makes a bwrap the harness runs itself (Codex's
		// sandbox) take the privileged path, which then fails.
		a = append(a, "--uid", "65534", "--gid", "65534")
	}
	return a
}

// Resolve is the confinement r gets on this bridge: r raised to the
// operator's floor (Floor.Raise). Check and Prepare resolve the request
// they are given.
func (j *Jailer) Resolve(r Request) Request { return j.opts.Floor.Raise(r) }

// Check reports whether r, raised to the floor, can be enforced now for a
// turn in cwd ("" for the bridge's working directory): it probes bwrap
// again (an *UnavailableError), checks the network jail (*NetError) and
// the paths (*RequestError). A turn without confinement is always fine.
func (j *Jailer) Check(ctx context.Context, r Request, cwd string) error {
	r = j.Resolve(r)
	if !r.Active() {
		return nil
	}
	if _, _, err := j.paths(r, cwd); err != nil {
		return err
	}
	if r.Net {
		if err := j.checkNet(r); err != nil {
			return err
		}
	}
	if !r.Net {
		return j.Probe(ctx)
	}
	return j.ProbeIsolated(ctx)
}

// ProbeIsolated is Probe for a confinement with a network namespace of its
// own (a net jail, an exact process environment): it fails where bwrap
// cannot bring one up, though the filesystem jail holds (gVisor).
func (j *Jailer) ProbeIsolated(ctx context.Context) error {
	if err := j.Probe(ctx); err != nil {
		return err
	}
	return j.Isolated()
}

// Isolated is the last probe's verdict on a confinement with a network
// namespace of its own (see ProbeIsolated); nil where it holds.
func (j *Jailer) Isolated() error {
	j.mu.Lock()
	defer j.mu.Unlock()
	if !j.probed {
		return &UnavailableError{Reason: ReasonNamespacesDenied, Detail: "not probed yet"}
	}
	return cmp.Or(j.last, j.lastNet)
}

func (j *Jailer) checkNet(r Request) error {
	if j.epErr != nil {
		return &NetError{Msg: "net-jail was requested but cannot be enforced: " + j.epErr.Error()}
	}
	if j.opts.Relay == "" {
		return &NetError{Msg: "net-jail was requested but the bridge does not know its own executable to relay with"}
	}
	asserted, err := wire.CanonicalAllow(r.Allow)
	if err != nil {
		return &RequestError{Msg: err.Error()}
	}
	if len(asserted) > 0 && !equal(asserted, []string{j.ep.allow}) {
		return &NetError{Msg: fmt.Sprintf("net-jail allowlist mismatch: the request requires exactly [%s] but the enforced allowlist is [%s]; "+
			"execution.netJail.allow asserts what is in force rather than changing it (the model endpoint, TANGLE_ROUTER_URL); "+
			"drop the assertion to accept the enforced list", strings.Join(asserted, ", "), j.ep.allow)}
	}
	return nil
}

func equal(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func (j *Jailer) allowList() []string {
	if j.ep == nil {
		return nil
	}
	return []string{j.ep.allow}
}

// Adopt takes the verdict of from's last probe as this jailer's, when
// from probed the same binary on this host, and reports whether it did:
// a standby bridge probes before its claim, so that the engine of the
// claim need not (a probe makes namespaces, which the kernel makes and
// tears down one at a time across the host's boxes).
func (j *Jailer) Adopt(from *Jailer) bool {
	if from == nil || from.opts.Bwrap != j.opts.Bwrap {
		return false
	}
	from.mu.Lock()
	last, lastNet, probed := from.last, from.lastNet, from.probed
	from.mu.Unlock()
	if !probed {
		return false
	}
	j.mu.Lock()
	j.last, j.lastNet, j.probed = last, lastNet, true
	j.mu.Unlock()
	return true
}

// Caps is the execution part of the bridge's capabilities, from the last
// probe (none yet: unavailable), with the operator's floor.
func (j *Jailer) Caps() wire.ExecutionCaps {
	j.mu.Lock()
	last, lastNet, probed := j.last, j.lastNet, j.probed
	j.mu.Unlock()
	fsFloor, netFloor := j.opts.Floor.modes()
	c := wire.ExecutionCaps{Kinds: []string{wire.ExecutionHost}, TimeoutMS: true,
		Jail:    wire.JailCaps{Modes: []string{wire.JailOff}, Floor: fsFloor},
		NetJail: wire.NetJailCaps{Modes: []string{wire.NetJailOff}, Floor: netFloor}}
	switch {
	case !probed:
		c.Jail.Unavailable = "not probed yet"
	case last != nil:
		c.Jail.Unavailable = last.Error()
	default:
		c.Jail.Modes = append(c.Jail.Modes, wire.JailWrite, wire.JailFS)
		c.Jail.Enforcer = "bwrap"
	}
	switch {
	case c.Jail.Unavailable != "":
		c.NetJail.Unavailable = c.Jail.Unavailable
	case lastNet != nil:
		c.NetJail.Unavailable = lastNet.Error()
	case j.epErr != nil:
		c.NetJail.Unavailable = j.epErr.Error()
	case j.opts.Relay == "":
		c.NetJail.Unavailable = "the bridge does not know its own executable to relay with"
	default:
		c.NetJail.Modes = append(c.NetJail.Modes, wire.NetJailOn)
		c.NetJail.Allow = j.allowList()
	}
	return c
}
