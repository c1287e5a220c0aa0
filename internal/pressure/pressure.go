// Package pressure tells a quiet machine from a busy one by the kernel's
// pressure stall information (/proc/pressure, Linux 4.20 and later): the
// share of wall time in which some task waited for a CPU, or for memory
// the kernel had to reclaim. Optional work (a harness started ahead of
// its turn) waits for a quiet machine, so that it never competes with
// the work that is due: a burst of box starts, a turn, the engine that
// serves both.
package pressure

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"time"
)

// Stall is the share of a window (0 to 1) in which some task stalled.
type Stall struct {
	CPU, Memory float64
}

// totals are the cumulative stall times of the "some" lines.
type totals struct {
	cpu, memory time.Duration
	at          time.Time
}

// read reads the cumulative stall times under dir (a /proc/pressure).
func read(dir string) (totals, error) {
	cpu, err := someTotal(filepath.Join(dir, "cpu"))
	if err != nil {
		return totals{}, err
	}
	mem, err := someTotal(filepath.Join(dir, "memory"))
	if err != nil {
		return totals{}, err
	}
	return totals{cpu: cpu, memory: mem, at: time.Now()}, nil
}

// someTotal is the total= field of a pressure file's "some" line, in
// microseconds.
func someTotal(path string) (time.Duration, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		fields := bytes.Fields(sc.Bytes())
		if len(fields) == 0 || string(fields[0]) != "some" {
			continue
		}
		for _, f := range fields[1:] {
			v, ok := bytes.CutPrefix(f, []byte("total="))
			if !ok {
				continue
			}
			us, err := strconv.ParseInt(string(v), 10, 64)
			if err != nil {
				return 0, fmt.Errorf("pressure: %s: total %q: %w", path, v, err)
			}
			return time.Duration(us) * time.Microsecond, nil
		}
	}
	return 0, fmt.Errorf("pressure: %s: no some total", path)
}

// share is the stall between a and b as a share of the wall time.
func share(a, b totals) Stall {
	wall := b.at.Sub(a.at)
	if wall <= 0 {
		return Stall{}
	}
	return Stall{CPU: min(1, float64(b.cpu-a.cpu)/float64(wall)), Memory: min(1, float64(b.memory-a.memory)/float64(wall))}
}

// ErrUnavailable reports a kernel without pressure information, or a
// sandbox that hides it (gVisor has none).
var ErrUnavailable = errors.New("pressure: no pressure stall information")

// Measure returns the stall over the next window read from dir (default
// /proc/pressure).
func Measure(ctx context.Context, dir string, window time.Duration) (Stall, error) {
	if dir == "" {
		dir = DefaultDir
	}
	a, err := read(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return Stall{}, ErrUnavailable
	}
	if err != nil {
		return Stall{}, err
	}
	if err := sleep(ctx, window); err != nil {
		return Stall{}, err
	}
	b, err := read(dir)
	if err != nil {
		return Stall{}, err
	}
	return share(a, b), nil
}

// sleep waits d unless ctx ends first.
func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// DefaultDir is where Linux shows the machine's pressure.
const DefaultDir = "/proc/pressure"

// Gate waits for a quiet machine.
type Gate struct {
	// Dir holds the pressure files (default DefaultDir).
	Dir string
	// Window is how long each look at the machine lasts (default 100 ms).
	Window time.Duration
	// MaxCPU and MaxMemory are the stall shares a quiet window stays
	// under (defaults 0.25 and 0.02).
	MaxCPU, MaxMemory float64
}

// Wait returns once a window passes with the stalls under the gate's
// bounds, or at once where the machine tells no pressure this process can
// read (no files, a sandbox that hides them, a format it does not know:
// the work then runs as if the gate were not there). It returns ctx's
// error if the machine stays busy until ctx ends.
func (g Gate) Wait(ctx context.Context) error {
	window, maxCPU, maxMem := g.Window, g.MaxCPU, g.MaxMemory
	if window <= 0 {
		window = 100 * time.Millisecond
	}
	if maxCPU <= 0 {
		maxCPU = 0.25
	}
	if maxMem <= 0 {
		maxMem = 0.02
	}
	dir := g.Dir
	if dir == "" {
		dir = DefaultDir
	}
	if _, err := read(dir); err != nil {
		return nil // no pressure this process can read
	}
	for {
		// A random start, so that the boxes of one machine waiting for
		// it to be quiet do not all look at the same window and all
		// start at once when it is.
		if err := sleep(ctx, rand.N(window)); err != nil {
			return err
		}
		s, err := Measure(ctx, g.Dir, window)
		switch {
		case ctx.Err() != nil:
			return ctx.Err()
		case err != nil:
			return nil // the pressure files stopped answering: as none
		case s.CPU <= maxCPU && s.Memory <= maxMem:
			return nil
		}
	}
}
