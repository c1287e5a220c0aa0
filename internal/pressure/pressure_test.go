package pressure

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"testing/synctest"
	"time"
)

func TestSomeTotal(t *testing.T) {
	for _, tc := range []struct {
		name, text string
		want       time.Duration
		err        bool
	}{
		{"cpu", "some avg10=59.86 avg60=35.06 avg300=53.01 total=22151021324\nfull avg10=0.00 avg60=0.00 avg300=0.00 total=0\n", 22151021324 * time.Microsecond, false},
		{"some only", "some avg10=0.00 avg60=0.00 avg300=0.00 total=7\n", 7 * time.Microsecond, false},
		{"full first", "full avg10=0.00 total=9\nsome avg10=0.00 total=3\n", 3 * time.Microsecond, false},
		{"no some", "full avg10=0.00 total=9\n", 0, true},
		{"bad total", "some total=x\n", 0, true},
		{"empty", "", 0, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "cpu")
			if err := os.WriteFile(path, []byte(tc.text), 0o600); err != nil {
				t.Fatal(err)
			}
			got, err := someTotal(path)
			if (err != nil) != tc.err {
				t.Fatalf("err = %v, want error %v", err, tc.err)
			}
			if got != tc.want {
				t.Errorf("total = %v, want %v", got, tc.want)
			}
		})
	}
}

// machine plays /proc/pressure in dir: its stall totals grow by the
// shares busy says, as the (fake) clock runs.
type machine struct {
	dir         string
	cpu, memory time.Duration
}

func (m *machine) write(t *testing.T) {
	t.Helper()
	for name, total := range map[string]time.Duration{"cpu": m.cpu, "memory": m.memory} {
		text := fmt.Sprintf("some avg10=0.00 avg60=0.00 avg300=0.00 total=%d\nfull avg10=0.00 avg60=0.00 avg300=0.00 total=0\n", total.Microseconds())
		// As the kernel's, a file is read whole or not at all.
		tmp := filepath.Join(m.dir, "."+name)
		if err := os.WriteFile(tmp, []byte(text), 0o600); err != nil {
			t.Error(err)
		}
		if err := os.Rename(tmp, filepath.Join(m.dir, name)); err != nil {
			t.Error(err)
		}
	}
}

// run advances the totals every 10 ms by cpu and memory shares of it
// until ctx ends.
func (m *machine) run(ctx context.Context, t *testing.T, phases []phase) {
	const tick = 10 * time.Millisecond
	start := time.Now()
	for ctx.Err() == nil {
		time.Sleep(tick)
		elapsed := time.Since(start)
		for _, p := range phases {
			if elapsed <= p.until {
				m.cpu += time.Duration(p.cpu * float64(tick))
				m.memory += time.Duration(p.memory * float64(tick))
				break
			}
		}
		m.write(t)
	}
}

type phase struct {
	until       time.Duration
	cpu, memory float64
}

func TestGate_Wait(t *testing.T) {
	forever := time.Hour
	for _, tc := range []struct {
		name   string
		phases []phase
		// quietFrom is when the machine turns quiet; -1 for never (the
		// context ends). Wait looks at a random moment each time, so it
		// returns within three windows after it.
		quietFrom time.Duration
	}{
		{"quiet", []phase{{forever, 0.05, 0}}, 0},
		{"busy, then quiet", []phase{{950 * time.Millisecond, 0.9, 0}, {forever, 0.1, 0}}, 950 * time.Millisecond},
		{"memory reclaim, then quiet", []phase{{450 * time.Millisecond, 0, 0.3}, {forever, 0, 0}}, 450 * time.Millisecond},
		{"busy throughout", []phase{{forever, 1, 0}}, -1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				m := &machine{dir: t.TempDir()}
				m.write(t)
				ctx, cancel := context.WithTimeout(t.Context(), 3*time.Second)
				defer cancel()
				mctx, stop := context.WithCancel(ctx)
				done := make(chan struct{})
				go func() { defer close(done); m.run(mctx, t, tc.phases) }()
				start := time.Now()
				err := Gate{Dir: m.dir}.Wait(ctx)
				took := time.Since(start)
				stop()
				<-done
				if tc.quietFrom < 0 {
					if !errors.Is(err, context.DeadlineExceeded) {
						t.Fatalf("Wait = %v after %v, want the context's end", err, took)
					}
					return
				}
				if err != nil {
					t.Fatalf("Wait: %v", err)
				}
				const window = 100 * time.Millisecond
				// A window may begin a little before the machine turns
				// quiet and still be quiet enough.
				if took < tc.quietFrom+window/2 || took > tc.quietFrom+3*window {
					t.Errorf("Wait returned after %v, want within [%v, %v]", took, tc.quietFrom+window/2, tc.quietFrom+3*window)
				}
			})
		})
	}
}

func TestGate_Unavailable(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "none")
	if _, err := Measure(t.Context(), dir, time.Millisecond); !errors.Is(err, ErrUnavailable) {
		t.Fatalf("Measure = %v, want ErrUnavailable", err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel() // Wait must not look at the clock at all
	if err := (Gate{Dir: dir}).Wait(ctx); err != nil {
		t.Fatalf("Wait without pressure files = %v, want nil", err)
	}
	// Files this process cannot read as pressure: as none.
	garbled := t.TempDir()
	for _, name := range []string{"cpu", "memory"} {
		if err := os.WriteFile(filepath.Join(garbled, name), []byte("some avg10=0.00\n"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if err := (Gate{Dir: garbled}).Wait(ctx); err != nil {
		t.Fatalf("Wait with pressure files it cannot read = %v, want nil", err)
	}
}

// TestMeasure_Machine reads this machine's own pressure, when it has it.
func TestMeasure_Machine(t *testing.T) {
	s, err := Measure(t.Context(), "", 20*time.Millisecond)
	if errors.Is(err, ErrUnavailable) {
		t.Log("this kernel shows no pressure")
		return
	}
	if err != nil {
		t.Fatal(err)
	}
	if s.CPU < 0 || s.CPU > 1 || s.Memory < 0 || s.Memory > 1 {
		t.Fatalf("stall %+v out of [0, 1]", s)
	}
}
