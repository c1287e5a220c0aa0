package e2b_test

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/tangle-network/boxctl/internal/boxtest"
	"github.com/tangle-network/boxctl/internal/e2btest"
	"github.com/tangle-network/boxctl/vendors"
	"github.com/tangle-network/boxctl/vendors/boxmeta"
	"github.com/tangle-network/boxctl/vendors/e2b"
	"github.com/tangle-network/boxctl/vendors/e2b/e2bemu"
	"github.com/tangle-network/boxctl/vendors/reaper"
	"github.com/tangle-network/boxctl/vendors/vendortest"
)

// TestVendor_CreatesUnderFaults makes 20 boxes at once while 30% of the
// control plane's answers are 429 or 503 (half the failed creates having
// made their sandbox anyway): every create succeeds, no sandbox is made
// twice, and once the boxes are destroyed gc finds none left.
func TestVendor_CreatesUnderFaults(t *testing.T) {
	t.Parallel()
	img := boxtest.Pushed(t, boxtest.Options{})
	env := e2btest.Start(t, func(o *e2bemu.Options) { o.Templates = map[string]string{"box": img} })
	v := env.Client(t, e2b.WithRetry(8, 5*time.Millisecond, 50*time.Millisecond), e2b.WithCreateAttempts(8))
	env.Server.SetFaults(e2bemu.Faults{ErrorRate: 0.3, LostRate: 0.5})
	tag := vendortest.RunTag(t)

	const n = 20
	boxes := make([]vendors.Box, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			boxes[i], errs[i] = v.Create(t.Context(), vendors.CreateSpec{Image: env.Template, Lifetime: 10 * time.Minute, RunTag: tag})
		})
	}
	wg.Wait()
	t.Cleanup(func() {
		for _, b := range boxes {
			if b != nil {
				_ = b.Destroy(context.WithoutCancel(t.Context()))
			}
		}
	})
	var ids []string
	for i, err := range errs {
		if err != nil {
			t.Errorf("Create #%d = %v", i, err)
			continue
		}
		ids = append(ids, boxes[i].ID())
	}
	slices.Sort(ids)
	if len(slices.Compact(slices.Clone(ids))) != len(ids) {
		t.Errorf("creates returned the same sandbox twice: %v", ids)
	}
	// The emulator's own count: no sandbox beyond the ones returned.
	made := env.Server.Sandboxes()
	slices.Sort(made)
	if !slices.Equal(made, ids) {
		t.Errorf("the emulator holds %d sandboxes %v, the creates returned %d %v", len(made), made, len(ids), ids)
	}
	listed, err := v.List(t.Context(), map[string]string{boxmeta.LabelRunTag: tag})
	if err != nil || len(listed) != len(ids) {
		t.Errorf("List(run tag) = %d boxes, %v; want %d", len(listed), err, len(ids))
	}

	for i, b := range boxes {
		if b != nil {
			if err := b.Destroy(t.Context()); err != nil {
				t.Errorf("Destroy #%d = %v", i, err)
			}
		}
	}
	reaped, err := reaper.Reap(t.Context(), v, reaper.Options{Filter: reaper.RunTagFilter(tag), DryRun: true})
	if err != nil || len(reaped) != 0 {
		t.Errorf("GC after the destroys = %v, %v; want nothing to reap", reaped, err)
	}
	if left, err := v.List(t.Context(), map[string]string{boxmeta.LabelRunTag: tag}); err != nil || len(left) != 0 {
		t.Errorf("List(run tag) after the destroys = %v, %v; want none", left, err)
	}
	if left := env.Server.Sandboxes(); len(left) != 0 {
		t.Errorf("the emulator still holds %v", left)
	}
}
