package vendors_test

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/tangle-network/boxctl/vendors"
)

// Outcomes of one create call on the plane.
type outcome int

const (
	made      outcome = iota // made and answered
	lost                     // made, its answer lost (an unsure error)
	lostLate                 // made, its answer lost, and missing from listings until the next create
	failed                   // not made, an unsure error
	refused                  // not made, a refusal
	landsLate                // cut short by its context, made a second later
)

var errUnsure = errors.New("502 bad gateway")

// plane is a control plane in memory that makes boxes as its script
// says, with a create token on each, listed by it.
type plane struct {
	mu        sync.Mutex
	script    []outcome
	calls     int
	boxes     map[string]bool // id -> listed
	destroyed []string
	failKill  string // the id whose destroy fails
	adopted   []string
	cancel    context.CancelFunc // called by the create of outcome refused when set
}

func (p *plane) create(ctx context.Context) (string, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for id := range p.boxes {
		p.boxes[id] = true
	}
	o := p.script[min(p.calls, len(p.script)-1)]
	p.calls++
	id := fmt.Sprintf("box-%d", p.calls)
	switch o {
	case made, lost, lostLate:
		p.boxes[id] = o != lostLate
	}
	switch o {
	case made:
		return id, nil
	case landsLate:
		p.cancel()
		time.AfterFunc(time.Second, func() {
			p.mu.Lock()
			defer p.mu.Unlock()
			p.boxes[id] = true
		})
		return "", ctx.Err()
	case refused:
		if p.cancel != nil {
			p.cancel()
			return "", ctx.Err()
		}
		return "", errors.New("400 bad request")
	}
	return "", errUnsure
}

func (p *plane) find(context.Context) ([]string, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	var ids []string
	for _, id := range slices.Sorted(maps.Keys(p.boxes)) {
		if p.boxes[id] {
			ids = append(ids, id)
		}
	}
	return ids, nil
}

func (p *plane) destroy(_ context.Context, id string) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if id == p.failKill {
		return errors.New("destroy refused")
	}
	delete(p.boxes, id)
	p.destroyed = append(p.destroyed, id)
	return nil
}

func (p *plane) steps() vendors.IdempotentCreate[string] {
	return vendors.IdempotentCreate[string]{
		Vendor:  "plane",
		Create:  p.create,
		Unsure:  func(err error) bool { return errors.Is(err, errUnsure) },
		Find:    p.find,
		ID:      func(id string) string { return id },
		Destroy: p.destroy,
		Adopt: func(_ context.Context, id string) (string, error) {
			p.adopted = append(p.adopted, id)
			return id, nil
		},
	}
}

func TestIdempotentCreate(t *testing.T) {
	for _, tc := range []struct {
		name      string
		script    []outcome
		failKill  string
		cancel    bool
		want      string // the box returned; "" for an error
		wantErr   string
		wantCalls int
		wantLeft  []string
		adopted   []string
		cleanupID string // the *CleanupError's box
	}{
		{name: "made at once", script: []outcome{made}, want: "box-1", wantCalls: 1, wantLeft: []string{"box-1"}},
		{name: "answer lost, found before asking again", script: []outcome{lost}, want: "box-1", wantCalls: 1,
			wantLeft: []string{"box-1"}, adopted: []string{"box-1"}},
		{name: "a late duplicate is destroyed", script: []outcome{lostLate, made}, want: "box-2", wantCalls: 2, wantLeft: []string{"box-2"}},
		{name: "unsure failures until the attempts end", script: []outcome{failed}, wantErr: errUnsure.Error(), wantCalls: 3},
		{name: "a refusal is returned at once", script: []outcome{refused}, wantErr: "400", wantCalls: 1},
		{name: "a refusal after a late box removes it", script: []outcome{lostLate, refused}, wantErr: "400", wantCalls: 2},
		{name: "a duplicate that cannot be destroyed is named", script: []outcome{lostLate, made}, failKill: "box-1",
			wantErr: "destroy a duplicate", wantCalls: 2, wantLeft: []string{"box-1", "box-2"}, cleanupID: "box-1"},
		{name: "a box the abandon cannot remove is named", script: []outcome{lostLate, refused}, failKill: "box-1",
			wantErr: "destroy refused", wantCalls: 2, wantLeft: []string{"box-1"}, cleanupID: "box-1"},
		{name: "a cancelled create removes what it made", script: []outcome{lostLate, refused}, cancel: true,
			wantErr: "context canceled", wantCalls: 2},
		{name: "a cancelled create removes the box that lands after", script: []outcome{landsLate}, cancel: true,
			wantErr: "context canceled", wantCalls: 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				ctx, cancel := context.WithCancel(t.Context())
				defer cancel()
				p := &plane{script: tc.script, boxes: map[string]bool{}, failKill: tc.failKill}
				if tc.cancel {
					p.cancel = cancel
				}
				got, err := p.steps().Run(ctx)
				if got != tc.want || (err == nil) != (tc.wantErr == "") || err != nil && !strings.Contains(err.Error(), tc.wantErr) {
					t.Errorf("Run = %q, %v; want %q, error with %q", got, err, tc.want, tc.wantErr)
				}
				if p.calls != tc.wantCalls {
					t.Errorf("%d creates, want %d", p.calls, tc.wantCalls)
				}
				if left := slices.Sorted(maps.Keys(p.boxes)); !slices.Equal(left, tc.wantLeft) {
					t.Errorf("boxes left %v, want %v", left, tc.wantLeft)
				}
				if !slices.Equal(p.adopted, tc.adopted) {
					t.Errorf("adopted %v, want %v", p.adopted, tc.adopted)
				}
				var ce *vendors.CleanupError
				if errors.As(err, &ce) != (tc.cleanupID != "") || ce != nil && ce.BoxID != tc.cleanupID {
					t.Errorf("Run's error %v: cleanup handle %v, want %q", err, ce, tc.cleanupID)
				}
			})
		})
	}
}

func TestDiscard(t *testing.T) {
	cause := errors.New("not ready")
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	var live bool
	err := vendors.Discard(ctx, "v", "b1", func(ctx context.Context) error {
		live = ctx.Err() == nil
		return nil
	}, cause)
	if err != cause || !live {
		t.Errorf("Discard after a cancel = %v (destroy on a live context: %v), want the cause, destroyed", err, live)
	}
	derr := errors.New("destroy failed")
	err = vendors.Discard(t.Context(), "v", "b1", func(context.Context) error { return derr }, cause)
	var ce *vendors.CleanupError
	if !errors.As(err, &ce) || ce.BoxID != "b1" || !errors.Is(err, cause) || !errors.Is(err, derr) {
		t.Errorf("Discard with a failed destroy = %v, want a *CleanupError naming b1 with both errors", err)
	}
	if tok := vendors.CreateToken(); len(tok) != 26 || strings.ToLower(tok) != tok || tok == vendors.CreateToken() {
		t.Errorf("CreateToken() = %q, want 26 lowercase characters, new each call", tok)
	}
}
