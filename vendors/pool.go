package vendors

import (
	"context"
	"time"
)

// WarmPools is a vendor that keeps warm pools of boxes itself (on
// Kubernetes, agent-sandbox's SandboxWarmPool): the vendor refills a
// pool, and a Create whose CreateSpec.Pool names it claims one of its
// boxes instead of making one. A vendor without it has its pools kept by
// the caller (standby boxes booted ahead and claimed through the bridge).
type WarmPools interface {
	// EnsurePool creates or updates the pool of spec.
	EnsurePool(ctx context.Context, spec PoolSpec) error
	// WaitPool waits until every box the pool wants is ready.
	WaitPool(ctx context.Context, name string) error
	// DeletePool deletes the pool and its unclaimed boxes; claimed boxes
	// live on. Deleting a pool that is gone is not an error.
	DeletePool(ctx context.Context, name string) error
	// Pools lists the pools this vendor made, by name.
	Pools(ctx context.Context) ([]PoolSummary, error)
	// PoolState reads one pool; a pool that is gone matches ErrNotFound.
	PoolState(ctx context.Context, name string) (PoolStatus, error)
	// RecyclePool deletes some of the pool's unclaimed boxes made more
	// than maxAge ago, for the vendor to replace, and returns how many.
	RecyclePool(ctx context.Context, name string, maxAge time.Duration) (int, error)
}

// PoolSpec is a warm pool a vendor keeps (WarmPools).
type PoolSpec struct {
	// Name names the pool.
	Name string
	// Image is the box image of the pool's boxes.
	Image string
	// Replicas is how many unclaimed boxes the pool keeps ready.
	Replicas int32
	// Resources are the boxes' limits; zero fields mean the vendor's
	// defaults.
	Resources Resources
	// Standby, when set, makes the pool's boxes run the standby bridge
	// from their start, for StandbyPooler.ClaimStandby; a plain Create
	// claims only from a pool without it.
	Standby *PoolStandby
}

// PoolStandby is how a pool's boxes start the standby bridge.
type PoolStandby struct {
	// Harness names the harness the bridges serve: a claim asks for it.
	Harness string
	// Port is the bridge's port, probed on /health for the box's
	// readiness (0: no probe).
	Port int
	// Env is the standby bridge's environment: nothing personal.
	Env map[string]string
	// Dir is the bridge's working directory.
	Dir string
}

// PoolStatus is what a warm pool holds now.
type PoolStatus struct {
	// Want is the boxes the pool keeps; Idle its unclaimed boxes, Ready
	// those of them that are ready.
	Want  int `json:"want"`
	Idle  int `json:"idle"`
	Ready int `json:"ready"`
	// Oldest is when the oldest unclaimed box was made (zero: none).
	Oldest time.Time `json:"oldest,omitzero"`
}

// PoolSummary is a warm pool with its status.
type PoolSummary struct {
	Name string `json:"name"`
	PoolStatus
}
