package pool

import (
	"testing"
	"time"
)

// TestYields: a refill waits for the claims under way, at most
// refillYield from its first wait, and never while a claim waits for a
// box; the first wait asks for a refill at its end.
func TestYields(t *testing.T) {
	t0 := time.Unix(1000, 0)
	tests := []struct {
		name             string
		handing, waiting int
		yielded          time.Time // since when it waits already
		now              time.Time
		want             bool
		kicked           bool // a refill is asked for at the wait's end
	}{
		{"no claim under way", 0, 0, time.Time{}, t0, false, false},
		{"a claim under way", 1, 0, time.Time{}, t0, true, true},
		{"still within the bound", 3, 0, t0, t0.Add(refillYield - time.Millisecond), true, false},
		{"past the bound", 3, 0, t0, t0.Add(refillYield), false, false},
		{"a claim waits for a box", 2, 1, t0, t0.Add(time.Millisecond), false, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := &Pool{kick: make(chan struct{}, 1), handing: tt.handing, waiting: tt.waiting, yielded: tt.yielded}
			if got := p.yields(tt.now); got != tt.want {
				t.Fatalf("yields() = %v, want %v", got, tt.want)
			}
			if !tt.want && !p.yielded.IsZero() {
				t.Errorf("a refill that goes ahead left yielded = %v", p.yielded)
			}
			select {
			case <-p.kick:
				t.Fatal("kicked at once, want at the wait's end")
			default:
			}
			if tt.kicked {
				select {
				case <-p.kick:
				case <-time.After(10 * refillYield):
					t.Error("no refill asked for at the end of the wait")
				}
			}
		})
	}
}
