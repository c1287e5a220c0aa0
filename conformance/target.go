package conformance

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/tangle-network/boxctl/conformance/internal/cutproxy"
	"github.com/tangle-network/boxctl/pins"
	"github.com/tangle-network/boxctl/provider/sandbox"
	"github.com/tangle-network/boxctl/provider/sandbox/broker"
	"github.com/tangle-network/boxctl/vendors"
)

// Target is what the suite runs against: a vendor, an image on it and the
// model Router its boxes use.
type Target struct {
	// Vendor makes the boxes. Required.
	Vendor vendors.Vendor
	// Image is the box image, as the vendor creates boxes from it.
	// Required.
	Image string
	// ImageDigest is the image's digest, for the report (and for proving
	// a harness: see ProofFor); empty when unknown.
	ImageDigest string
	// Emulated reports that Vendor talks to a local emulator of the
	// vendor's control plane, not the vendor itself: a report of such a
	// run proves no harness.
	Emulated bool
	// Router is the model Router the boxes' harnesses use. Required unless
	// Local is set.
	Router sandbox.Router
	// Broker is the credential broker the boxes reach the model through,
	// at BrokerURL, in front of Router. Default: Run serves one in this
	// process where the vendor's boxes reach this machine (its host
	// address); a vendor without one runs its boxes on the Router itself,
	// and box.broker does not apply.
	Broker    broker.Granter
	BrokerURL string
	// Local is the local endpoint when the boxes use it: cases then check
	// the scripted replies exactly. Default Router is Local.Router.
	Local *Local
	// Repo is the repository the box.clone case clones; default
	// Local.Repo, and without either the case does not apply.
	Repo *Repo
	// Faults is the control plane's fault switch when the vendor talks
	// to an emulator that has one: the chaos.vendor case runs only then.
	Faults FaultSwitch
	// Pins are the versions the boxes' harnesses are checked against.
	// Default: the embedded pins.
	Pins *pins.Pins
	// Security is the suite's listeners and resolver for the security
	// cases, and how the boxes are confined (StartSecurity); without it
	// they do not apply.
	Security *Security
}

// Inspector is a vendor that shows everything its control plane shows of
// a box (for docker, the container's and every exec's inspect data): the
// box.secrets case searches it for the bearer and the router key.
type Inspector interface {
	Inspect(ctx context.Context, boxID string) ([]byte, error)
}

// Defaults of Options.
const (
	// DefaultParallel is how many cases run at once.
	DefaultParallel = 2
	// DefaultLifetime is the lifetime of every box the suite makes.
	DefaultLifetime = 15 * time.Minute
	// caseGrace is how long past its deadline the runner waits for a
	// case to return before it reports it stuck and moves on.
	caseGrace = 30 * time.Second
)

// Options tunes Run. The zero value runs every case for Claude Code.
type Options struct {
	// Harnesses are the harnesses to run the cases for, by name or backend
	// key. Default: claude-code.
	Harnesses []string
	// Cases select the cases (see Select). Default: every case.
	Cases []string
	// Parallel bounds how many cases run at once. Default:
	// DefaultParallel.
	Parallel int
	// CaseTimeout is the deadline of a case that names none. Default:
	// DefaultCaseTimeout.
	CaseTimeout time.Duration
	// ReadyTimeout bounds each box's wait for its bridge. Default:
	// sandbox.DefaultReadyTimeout.
	ReadyTimeout time.Duration
	// Lifetime is each box's lifetime. Default: DefaultLifetime.
	Lifetime time.Duration
	// Progress, when set, is called as each case starts and ends, one
	// call at a time.
	Progress func(Progress)
	// Chaos, when set, runs the chaos family (chaos.*) instead of the
	// catalogue of Cases.
	Chaos *Chaos
	// Logger receives debug records of the run (never a secret).
	// Default: discard.
	Logger *slog.Logger
}

// Progress is one step of a run: a case started (Result nil) or ended.
type Progress struct {
	Case    Case
	Harness string
	Result  *Result
}

// resolved is a checked target and its options.
type resolved struct {
	t         Target
	o         Options
	cases     []Case
	harnesses []Harness
}

func resolve(t Target, o Options) (*resolved, error) {
	var errs []error
	if t.Vendor == nil {
		errs = append(errs, errors.New("Target.Vendor is required"))
	}
	if t.Image == "" {
		errs = append(errs, errors.New("Target.Image is required"))
	}
	if t.Router == (sandbox.Router{}) && t.Local != nil {
		t.Router = t.Local.Router
	}
	if t.Router == (sandbox.Router{}) {
		errs = append(errs, errors.New("Target.Router (or Target.Local) is required"))
	}
	if t.Repo == nil && t.Local != nil {
		t.Repo = t.Local.Repo
	}
	if o.Parallel < 0 || o.CaseTimeout < 0 || o.ReadyTimeout < 0 || o.Lifetime < 0 {
		errs = append(errs, errors.New("Options: counts and durations must not be negative"))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	if t.Pins == nil {
		p, err := pins.Load()
		if err != nil {
			return nil, err
		}
		t.Pins = p
	}
	hs, err := harnesses(t.Pins, o.Harnesses)
	if err != nil {
		return nil, err
	}
	if o.Chaos != nil {
		ch := *o.Chaos
		if ch.Faults < 0 || ch.Idle < 0 || ch.Lanes < 0 {
			return nil, errors.New("Options.Chaos: counts and durations must not be negative")
		}
		if ch.Faults == 0 {
			ch.Faults = DefaultChaosFaults
		}
		if ch.Idle == 0 {
			ch.Idle = cutproxy.DefaultIdle
		}
		o.Chaos = &ch
	}
	cases, err := SelectFrom(Catalogue(o.Chaos != nil), o.Cases)
	if err != nil {
		return nil, err
	}
	if o.Parallel == 0 {
		o.Parallel = DefaultParallel
	}
	if o.CaseTimeout == 0 {
		o.CaseTimeout = DefaultCaseTimeout
	}
	if o.ReadyTimeout == 0 {
		o.ReadyTimeout = sandbox.DefaultReadyTimeout
	}
	if o.Lifetime == 0 {
		o.Lifetime = DefaultLifetime
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	return &resolved{t: t, o: o, cases: cases, harnesses: hs}, nil
}
