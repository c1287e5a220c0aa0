package daytonaemu

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"time"

	"github.com/tangle-network/boxctl/vendors"
	"github.com/tangle-network/boxctl/vendors/boxmeta"
)

// sweepEvery is how often lifetimes are enforced.
const sweepEvery = 500 * time.Millisecond

// labelSandbox marks the containers of the emulator's sandboxes.
const labelSandbox = "io.daytona.emulator.sandbox"

// start makes the sandbox's container and marks it started, or error
// with the reason.
func (s *Server) start(sb *sandbox) {
	vanish := s.faults.Faults().VanishAfter
	s.faults.Delay(sb.ctx)
	s.mu.Lock()
	env := maps.Clone(sb.Env)
	if env == nil {
		env = map[string]string{}
	}
	img, id, snap, user, policy := sb.image, sb.ID, sb.Snapshot, sb.User, sb.egress
	cpu, mem, disk := sb.CPU, sb.Memory, sb.Disk
	s.mu.Unlock()
	// The image's init reads BOX_DEADLINE; the Docker vendor sets it from
	// the lifetime it is given, so the deadline becomes that lifetime.
	life := s.opts.MaxLifetime
	if d, err := boxmeta.ParseDeadline(env[boxmeta.EnvDeadline]); err == nil {
		life = time.Until(d)
	}
	delete(env, boxmeta.EnvDeadline)
	delete(env, boxmeta.EnvLifetime)
	env["DAYTONA_SANDBOX_ID"], env["DAYTONA_SANDBOX_SNAPSHOT"], env["DAYTONA_SANDBOX_USER"] = id, snap, user
	res := vendors.Resources{CPUs: float64(cpu), MemoryBytes: int64(mem) << 30}
	_ = disk // the engine's storage drivers do not bound disk uniformly
	var box vendors.Box
	var ip string
	err := sb.ctx.Err()
	if err == nil && sb.dockerfile != "" {
		img, err = s.buildSandboxImage(sb)
	}
	if err == nil {
		if life < time.Second {
			err = errors.New("the sandbox's BOX_DEADLINE has passed")
		} else {
			box, ip, err = s.boxes.Create(sb.ctx, id, vendors.CreateSpec{Image: img, Lifetime: life, RunTag: "daytonaemu-" + id[:8],
				Labels: map[string]string{labelSandbox: id}, Env: env, Resources: res, Egress: policy})
		}
	}
	user, home, work := "", "", ""
	if err == nil {
		user, home, work = probeUser(sb.ctx, box)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	sb.pending, sb.UpdatedAt = false, time.Now().UTC()
	if box != nil && (err != nil || sb.DesiredState == stateDestroyed) {
		// Failed, or vanished while it started: its container goes too.
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			_ = s.boxes.Remove(ctx, id)
		}()
	}
	switch {
	case sb.DesiredState == stateDestroyed:
		return
	case err != nil:
		old := sb.State
		sb.State, sb.ErrorReason = stateError, fmt.Sprintf("Failed to start sandbox: %v", err)
		if be := (*buildError)(nil); errors.As(err, &be) {
			sb.State, sb.ErrorReason = stateBuildFailed, be.Error()
		}
		s.notify(sb, old)
		s.opts.Log.Info("daytona sandbox failed", "id", id, "reason", sb.ErrorReason)
		return
	}
	if sb.userFromImage && user != "" {
		sb.User = user
	}
	old := sb.State
	sb.box, sb.ip, sb.homeDir, sb.workDir = box, ip, home, work
	sb.State, sb.LastActivity = stateStarted, time.Now().UTC()
	s.notify(sb, old)
	s.opts.Log.Info("daytona sandbox started", "id", id, "container", box.ID()[:12])
	if vanish > 0 {
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			select {
			case <-time.After(vanish):
				_ = s.Vanish(id)
			case <-sb.ctx.Done():
			}
		}()
	}
}

// buildSandboxImage builds the image of a declarative build, its state
// building_snapshot meanwhile; a failed build is build_failed.
func (s *Server) buildSandboxImage(sb *sandbox) (string, error) {
	s.mu.Lock()
	old := sb.State
	sb.State, sb.UpdatedAt = stateBuildingSnapshot, time.Now().UTC()
	s.notify(sb, old)
	s.mu.Unlock()
	img, err := s.buildImage(sb.ctx, sb.dockerfile)
	s.mu.Lock()
	defer s.mu.Unlock()
	if err != nil {
		return "", &buildError{err}
	}
	sb.image = img
	old = sb.State
	sb.State = "starting"
	s.notify(sb, old)
	return img, nil
}

// buildError is a failed declarative build.
type buildError struct{ err error }

func (e *buildError) Error() string { return "build failed: " + e.err.Error() }
func (e *buildError) Unwrap() error { return e.err }

// destroy removes a deleted sandbox's container and marks it destroyed.
func (s *Server) destroy(sb *sandbox) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	s.removeContainer(ctx, sb)
	s.mu.Lock()
	defer s.mu.Unlock()
	old := sb.State
	if sb.State != stateError {
		sb.State = stateDestroyed
	}
	sb.pending, sb.UpdatedAt = false, time.Now().UTC()
	s.closePreviews(sb.ID)
	s.notify(sb, old)
	s.opts.Log.Info("daytona sandbox destroyed", "id", sb.ID)
}

// removeContainer ends the sandbox's streams and removes its container.
func (s *Server) removeContainer(ctx context.Context, sb *sandbox) {
	sb.cancel()
	if err := s.boxes.Remove(ctx, sb.ID); err != nil {
		s.opts.Log.Warn("daytona emulator: remove container", "id", sb.ID, "err", err)
	}
}

// stop stops a started sandbox. Its container is frozen, to be resumed
// by a start; one that ended by itself is removed. Call with s.mu.
func (s *Server) stop(sb *sandbox, why string) {
	old := sb.State
	sb.State, sb.DesiredState, sb.StoppedAt, sb.UpdatedAt = stateStopped, stateStopped, time.Now().UTC(), time.Now().UTC()
	s.notify(sb, old)
	s.opts.Log.Info("daytona sandbox stopped", "id", sb.ID, "why", why)
	sb.cancel() // its toolbox calls and preview streams end
	box := sb.box
	ended := why == whyEnded
	if ended {
		sb.box = nil
	}
	frozen := make(chan struct{})
	sb.frozen = frozen
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		defer close(frozen)
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if box == nil {
			return
		}
		if ended {
			_ = s.boxes.Remove(ctx, sb.ID)
			return
		}
		if err := s.boxes.Freeze(ctx, sb.ID); err != nil {
			// As Daytona reports a stop that failed: the sandbox is in
			// error, with the reason.
			s.opts.Log.Warn("daytona emulator: freeze a stopped sandbox", "id", sb.ID, "err", err)
			s.mu.Lock()
			if sb.State == stateStopped {
				sb.State, sb.ErrorReason, sb.UpdatedAt = stateError, "Failed to stop sandbox: "+err.Error(), time.Now().UTC()
				s.notify(sb, stateStopped)
			}
			s.mu.Unlock()
		}
	}()
}

// whyEnded is the reason a sandbox stops when its container ended.
const whyEnded = "its container ended"

// Vanish deletes the sandbox behind its clients' backs: its container is
// removed and its streams cut at once, and the control plane no longer
// knows it.
func (s *Server) Vanish(id string) error {
	s.mu.Lock()
	sb := s.sandboxes[id]
	if sb == nil || sb.State == stateDestroyed {
		s.mu.Unlock()
		return fmt.Errorf("no sandbox %s", id)
	}
	sb.DesiredState = stateDestroyed
	s.mu.Unlock()
	s.opts.Log.Info("daytona sandbox vanishes", "id", id)
	s.destroy(sb)
	return nil
}

// touch records activity on the sandbox (toolbox and preview requests),
// which postpones its auto-stop.
func (s *Server) touch(sb *sandbox) {
	s.mu.Lock()
	sb.LastActivity = time.Now().UTC()
	s.mu.Unlock()
}

// sweep enforces lifetimes until the server closes: a started sandbox
// idle for its autoStopInterval, or whose container ended, stops; a
// stopped one is deleted after its autoDeleteInterval.
func (s *Server) sweep() {
	tick := time.NewTicker(sweepEvery)
	defer tick.Stop()
	for {
		select {
		case <-s.ctx.Done():
			return
		case <-tick.C:
		}
		now := time.Now()
		s.mu.Lock()
		var running []*sandbox
		for _, sb := range s.sandboxes {
			switch {
			case sb.State == stateStarted && sb.DesiredState == stateStarted:
				if sb.AutoStop > 0 && now.Sub(sb.LastActivity) >= time.Duration(sb.AutoStop)*time.Minute {
					s.stop(sb, "idle for its auto-stop interval")
					continue
				}
				running = append(running, sb)
			case sb.State == stateStopped && sb.AutoDelete >= 0 && !sb.pending &&
				now.Sub(sb.StoppedAt) >= time.Duration(sb.AutoDelete)*time.Minute:
				s.markDeleted(sb)
				s.wg.Add(1)
				go func() {
					defer s.wg.Done()
					s.destroy(sb)
				}()
			}
		}
		s.mu.Unlock()
		for _, sb := range running {
			ctx, cancel := context.WithTimeout(s.ctx, 10*time.Second)
			_, err := sb.box.Status(ctx)
			cancel()
			if errors.Is(err, vendors.ErrNotFound) {
				s.mu.Lock()
				if sb.State == stateStarted && sb.DesiredState == stateStarted {
					s.stop(sb, whyEnded)
				}
				s.mu.Unlock()
			}
		}
	}
}
