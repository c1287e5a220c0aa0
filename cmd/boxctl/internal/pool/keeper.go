package pool

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync/atomic"
	"time"

	"github.com/tangle-network/boxctl/provider/sandbox"
	"github.com/tangle-network/boxctl/vendors"
)

// Keeper keeps one warm pool full. Its two kinds are a Pool (this
// machine's keeper of standby boxes, listed in the pool's file) and a
// vendor's own warm pool (vendors.WarmPools, on Kubernetes agent-sandbox's
// SandboxWarmPool), which the vendor refills while the keeper recycles
// old boxes; Pools.Keeper picks by the vendor's capability.
type Keeper interface {
	// Name is the pool's name.
	Name() string
	// Ensure makes the pool exist at its size; boxes come in the
	// background.
	Ensure(ctx context.Context) error
	// Keep keeps the pool full until ctx ends, calling report (when not
	// nil) with its stats every second, then drains it: the boxes still
	// waiting are destroyed, claimed boxes live on.
	Keep(ctx context.Context, report func(Stats)) error
	// Stats is a snapshot of the pool and its keeper.
	Stats() Stats
}

// Stats is a snapshot of a pool and its keeper.
type Stats struct {
	// Size is the boxes the pool keeps; Ready those waiting to be
	// claimed; Idle those not claimed yet, ready or not (a vendor's pool).
	Size, Ready, Idle int
	// Booting counts boots under way, Waiting the claims waiting for a
	// box (this machine's keeper).
	Booting, Waiting int
	// BreakerOpen is set while boots are paused after failures.
	BreakerOpen bool
	// Claims, hits, waits, misses and failed boots (this machine's
	// keeper: a vendor counts a pool of its own).
	Claims, Hits, Waits, Misses, Failures int64
	// Recycled counts boxes recycled past the maximum age; Healed those
	// replaced because they vanished or stopped answering.
	Recycled, Healed int64
	// Oldest is when the oldest waiting box was made (zero: unknown or
	// none).
	Oldest time.Time
	// VendorKept is set for a vendor's own pool, whose claims and boots
	// the vendor counts.
	VendorKept bool
	// LastError is the last boot's failure ("" after a success).
	LastError string
}

// String is the keeper's status line.
func (s Stats) String() string {
	if s.VendorKept {
		oldest := "-"
		if !s.Oldest.IsZero() {
			oldest = time.Since(s.Oldest).Round(time.Second).String()
		}
		return fmt.Sprintf("%d of %d ready, %d idle, oldest %s, %d recycled", s.Ready, s.Size, s.Idle, oldest, s.Recycled)
	}
	line := fmt.Sprintf("ready %d/%d, booting %d, waiting %d; claims %d (hits %d, waited %d, cold %d), boot failures %d, recycled %d, healed %d",
		s.Ready, s.Size, s.Booting, s.Waiting, s.Claims, s.Hits, s.Waits, s.Misses, s.Failures, s.Recycled, s.Healed)
	if s.BreakerOpen {
		line += "; boots paused"
	}
	if s.LastError != "" {
		line += "; last boot failure: " + s.LastError
	}
	return line
}

// Summary describes one pool, kept by this machine's keepers (its file)
// or by its vendor.
type Summary struct {
	Name string `json:"name"`
	// VendorKept is set for a vendor's own pool.
	VendorKept bool `json:"vendorKept,omitempty"`
	// Ready counts the boxes waiting to be claimed (of a keeper that
	// runs); Orphaned those of a keeper that is gone (`boxctl gc` removes
	// them).
	Ready    int      `json:"ready"`
	Orphaned int      `json:"orphaned"`
	Keepers  []string `json:"keepers"`
	// Want and Idle are a vendor's pool's size and its unclaimed boxes;
	// Oldest when the oldest of them was made.
	Want   int       `json:"want,omitempty"`
	Idle   int       `json:"idle,omitempty"`
	Oldest time.Time `json:"oldest,omitzero"`
}

// Pools are the pools of one vendor: those this machine keeps in files
// under a directory, or, for a vendor with warm pools of its own
// (vendors.WarmPools), the vendor's.
type Pools struct {
	vendor vendors.Vendor
	warm   vendors.WarmPools // nil: this machine keeps them
	dir    string
}

// For returns the pools of v: the vendor's own when it keeps warm pools,
// else this machine's under dir ("" for DefaultDir).
func For(v vendors.Vendor, dir string) Pools {
	wp, _ := v.(vendors.WarmPools)
	return Pools{vendor: v, warm: wp, dir: dir}
}

// VendorKept reports whether the vendor keeps the pools.
func (ps Pools) VendorKept() bool { return ps.warm != nil }

// Keeper returns the keeper of the pool o.Name: a Pool booting standby
// boxes (it starts booting once Ensure is called), or the keeper of the
// vendor's warm pool of standby bridges.
func (ps Pools) Keeper(o Options) (Keeper, error) {
	if ps.warm == nil {
		if o.Dir == "" {
			o.Dir = ps.dir
		}
		return New(o)
	}
	o, err := o.normalized()
	if err != nil {
		return nil, err
	}
	return &warmKeeper{o: o, v: ps.warm}, nil
}

// List describes the pools, by name.
func (ps Pools) List(ctx context.Context) ([]Summary, error) {
	if ps.warm == nil {
		return Summaries(ps.dir)
	}
	l, err := ps.warm.Pools(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]Summary, 0, len(l))
	for _, p := range l {
		out = append(out, Summary{Name: p.Name, VendorKept: true, Ready: p.Ready, Keepers: []string{}, Want: p.Want, Idle: p.Idle, Oldest: p.Oldest})
	}
	return out, nil
}

// Drain destroys the boxes waiting in the pool name and returns how many
// (a vendor's pool is deleted, with its unclaimed boxes: -1, as the
// vendor does not say how many). A keeper of this machine still running
// boots new ones.
func (ps Pools) Drain(ctx context.Context, name string) (int, error) {
	if ps.warm == nil {
		return Drain(ctx, ps.vendor, ps.dir, name)
	}
	return -1, ps.warm.DeletePool(ctx, name)
}

// Claim claims req from the pool name, kept by another process or by
// the vendor: a box that waits (Hit), else a cold create (Cold).
func (ps Pools) Claim(ctx context.Context, prov *sandbox.Provider, name string, req sandbox.CreateRequest) (*sandbox.Environment, Outcome, error) {
	if ps.warm == nil {
		return ClaimFrom(ctx, prov, ps.dir, name, req)
	}
	req.Pool = name
	e, err := prov.Create(ctx, req)
	if e != nil && slices.ContainsFunc(e.Timings(), func(ph sandbox.Phase) bool { return ph.Name == sandbox.PhaseVendorClaim }) {
		return e, Hit, err
	}
	return e, Cold, err
}

// warmKeeper keeps a vendor's warm pool of standby bridges: the vendor
// refills it and claims adopt its boxes; the keeper recycles boxes past
// the maximum age and deletes the pool when Keep ends.
type warmKeeper struct {
	o Options
	v vendors.WarmPools

	last     atomic.Pointer[Stats]
	recycled int64
}

func (k *warmKeeper) Name() string { return k.o.Name }

func (k *warmKeeper) Ensure(ctx context.Context) error {
	env, err := k.o.Provider.StandbyEnv(k.o.Harness)
	if err != nil {
		return err
	}
	k.last.Store(&Stats{Size: k.o.Size, VendorKept: true})
	return k.v.EnsurePool(ctx, vendors.PoolSpec{Name: k.o.Name, Image: k.o.Provider.Image(), Replicas: int32(k.o.Size),
		Standby: &vendors.PoolStandby{Harness: k.o.Harness, Port: sandbox.BridgePort, Env: env, Dir: sandbox.Workspace}})
}

func (k *warmKeeper) Stats() Stats {
	if s := k.last.Load(); s != nil {
		return *s
	}
	return Stats{Size: k.o.Size, VendorKept: true}
}

// Keep reads the pool's state each second, and every tenth of the
// maximum age (at least each second) recycles the boxes older than it. A
// failed call is logged and tried again at the next tick, so a passing
// API error does not end the keeper; a pool that is gone does. When ctx
// ends, the pool is deleted.
func (k *warmKeeper) Keep(ctx context.Context, report func(Stats)) (err error) {
	defer func() {
		dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
		defer cancel()
		err = errors.Join(err, k.v.DeletePool(dctx, k.o.Name))
	}()
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	every := max(k.o.MaxAge/10, time.Second)
	last := time.Now()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
		if time.Since(last) >= every {
			n, err := k.v.RecyclePool(ctx, k.o.Name, k.o.MaxAge)
			if err != nil && ctx.Err() == nil {
				k.o.Logger.Warn("pool: recycle failed, again at the next tick", "pool", k.o.Name, "err", err)
			} else {
				last = time.Now()
			}
			k.recycled += int64(n)
		}
		st, err := k.v.PoolState(ctx, k.o.Name)
		switch {
		case ctx.Err() != nil:
			return nil
		case errors.Is(err, vendors.ErrNotFound):
			return err
		case err != nil:
			k.o.Logger.Warn("pool: state not read, again at the next tick", "pool", k.o.Name, "err", err)
			continue
		}
		s := Stats{Size: st.Want, Idle: st.Idle, Ready: st.Ready, Recycled: k.recycled, Oldest: st.Oldest, VendorKept: true}
		k.last.Store(&s)
		if report != nil {
			report(s)
		}
	}
}
