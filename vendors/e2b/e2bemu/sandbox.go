package e2bemu

import (
	"context"
	"fmt"
	"maps"
	"net/http"
	"sync"
	"time"

	"github.com/tangle-network/boxctl/vendors"
	"github.com/tangle-network/boxctl/vendors/boxmeta"
	"github.com/tangle-network/boxctl/vendors/egress"
)

// sandbox is one sandbox and the Docker box behind it.
type sandbox struct {
	id, templateID, alias string
	box                   vendors.Box
	ip                    string // the container's address on the boxes' network
	startedAt             time.Time
	metadata              map[string]string
	envdToken             string // "" unless secure
	trafficToken          string // "" unless public traffic is off
	allowInternet         *bool
	egress                *egress.Policy // nil: open; guarded by Server.mu
	cpuCount, memoryMB    int
	ctx                   context.Context // ends when the sandbox does
	cancel                context.CancelFunc
	procs                 *procTable
	user                  string // the image's user: envd's default
	forkImage             string // the fork's image it holds (fork.go), or ""

	snapMu   sync.Mutex // held while a snapshot is taken
	homesMu  sync.Mutex
	homes    map[string]string   // home directories by user
	watchers map[string]*watcher // by watcher id

	// Guarded by Server.mu.
	endAt  time.Time
	timer  *time.Timer
	paused bool
	// timeout is the TTL of the sandbox's last create, connect or
	// timeout call: a resume without one starts it again.
	timeout time.Duration
}

// newSandbox asks for the fields of NewSandbox.
type newSandbox struct {
	TemplateID          string            `json:"templateID"`
	Timeout             *int              `json:"timeout"`
	AutoPause           bool              `json:"autoPause"`
	Secure              bool              `json:"secure"`
	AllowInternetAccess *bool             `json:"allow_internet_access"`
	Network             *networkConfig    `json:"network"`
	Metadata            map[string]string `json:"metadata"`
	EnvVars             map[string]string `json:"envVars"`

	// policy is the sandbox's egress policy read from the fields above
	// (egressPolicy); nil: open.
	policy *egress.Policy
}

// networkConfig is SandboxNetworkConfig, as far as it is emulated.
type networkConfig struct {
	AllowPublicTraffic *bool `json:"allowPublicTraffic"`
	egressRules
}

// createSandbox makes the Docker box of a sandbox and starts its timeout.
func (s *Server) createSandbox(ctx context.Context, req newSandbox, tpl *template, timeout time.Duration) (*sandbox, error) {
	id := randomString(20, lowerDigits)
	// The container's own deadline is the plan's maximum (a backstop
	// should the emulator die); the sandbox's timeout is enforced here.
	env := maps.Clone(req.EnvVars)
	delete(env, boxmeta.EnvDeadline)
	delete(env, boxmeta.EnvLifetime)
	box, ip, err := s.boxes.Create(ctx, id, vendors.CreateSpec{
		Image: tpl.image, Lifetime: s.opts.MaxTimeout + time.Minute, RunTag: s.runTag,
		Labels: map[string]string{"dev.e2b.emulator.sandbox": id}, Env: env, Egress: req.policy,
	})
	if err != nil {
		return nil, fmt.Errorf("create the sandbox's container: %w", err)
	}
	sctx, cancel := context.WithCancel(s.ctx)
	now := time.Now().UTC()
	sb := &sandbox{id: id, templateID: tpl.id, alias: tpl.name, box: box, ip: ip, startedAt: now,
		metadata: maps.Clone(req.Metadata), allowInternet: req.AllowInternetAccess, egress: req.policy, cpuCount: 2, memoryMB: 512,
		ctx: sctx, cancel: cancel, user: s.defaultUser(ctx, box.ID()), homes: map[string]string{},
		watchers: map[string]*watcher{}, timeout: timeout}
	if sb.metadata == nil {
		sb.metadata = map[string]string{}
	}
	sb.procs = newProcTable(sb)
	if req.Secure {
		sb.envdToken = randomString(32, hexDigits)
	}
	if req.Network != nil && req.Network.AllowPublicTraffic != nil && !*req.Network.AllowPublicTraffic {
		sb.trafficToken = randomString(32, hexDigits)
	}
	s.mu.Lock()
	if tpl.forked {
		sb.forkImage = tpl.image
		s.forkImages[tpl.image]++
	}
	s.sandboxes[id] = sb
	s.setTimeoutLocked(sb, now.Add(timeout))
	s.mu.Unlock()
	vanish := s.faults.Faults().VanishAfter
	if vanish > 0 {
		time.AfterFunc(vanish, func() { s.kill(id, "vanished (fault)") })
	}
	s.log.Info("sandbox created", "sandbox", id, "template", tpl.id, "container", box.ID()[:12], "timeout", timeout)
	return sb, nil
}

// setTimeoutLocked moves the sandbox's end; s.mu is held.
func (s *Server) setTimeoutLocked(sb *sandbox, end time.Time) {
	sb.endAt = end
	if sb.timer != nil {
		sb.timer.Stop()
	}
	id := sb.id
	sb.timer = time.AfterFunc(time.Until(end), func() { s.kill(id, "timed out") })
}

// lookup returns a live sandbox.
func (s *Server) lookup(id string) (*sandbox, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	sb, ok := s.sandboxes[id]
	return sb, ok
}

// kill ends a sandbox: it leaves the table, every request of it ends, and
// its container is removed. It reports whether the sandbox existed.
func (s *Server) kill(id, why string) bool {
	s.mu.Lock()
	sb, ok := s.sandboxes[id]
	if ok {
		delete(s.sandboxes, id)
		if sb.timer != nil {
			sb.timer.Stop()
		}
	}
	s.mu.Unlock()
	if !ok {
		return false
	}
	sb.cancel()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	// Killed first, so the box's processes end at once, as a microVM's do.
	if err := s.boxes.Remove(ctx, id); err != nil {
		s.log.Warn("remove a sandbox's container", "sandbox", id, "err", err)
	}
	if sb.forkImage != "" {
		s.releaseImage(sb.forkImage)
	}
	s.log.Info("sandbox ended", "sandbox", id, "why", why)
	return true
}

// running reports the count of sandboxes and creates in flight.
func (s *Server) running() int { return len(s.sandboxes) + s.pending }

// reserve holds a slot of MaxSandboxes for a create, reporting false when
// none is free; unreserve gives it back once the sandbox is made or not.
func (s *Server) reserve() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.opts.MaxSandboxes > 0 && s.running() >= s.opts.MaxSandboxes {
		return false
	}
	s.pending++
	return true
}

func (s *Server) unreserve() { s.mu.Lock(); s.pending--; s.mu.Unlock() }

// limitMessage is the message of a create refused by MaxSandboxes.
func (s *Server) limitMessage() string {
	return fmt.Sprintf("You have reached the maximum number of concurrent E2B sandboxes (%d). If you need more, please contact us at 'https://e2b.dev/docs/getting-help'", s.opts.MaxSandboxes)
}

// detail is SandboxDetail (and, without the token, ListedSandbox).
func (s *Server) detail(sb *sandbox, withToken bool) map[string]any {
	s.mu.Lock()
	end, state, egress := sb.endAt, stateOf(sb), sb.egress // egress changes under mu (handleNetwork)
	s.mu.Unlock()
	d := map[string]any{
		"templateID": sb.templateID, "sandboxID": sb.id, "clientID": "6532622b",
		"startedAt": sb.startedAt.Format(time.RFC3339Nano), "endAt": end.UTC().Format(time.RFC3339Nano),
		"cpuCount": sb.cpuCount, "memoryMB": sb.memoryMB, "diskSizeMB": 10240, "metadata": sb.metadata,
		"state": state, "envdVersion": envdVersion, "volumeMounts": []any{},
	}
	if sb.alias != "" {
		d["alias"] = sb.alias
	}
	if withToken {
		d["domain"] = s.opts.Domain
		if sb.envdToken != "" {
			d["envdAccessToken"] = sb.envdToken
		}
		if sb.allowInternet != nil {
			d["allowInternetAccess"] = *sb.allowInternet
		}
		network := map[string]any{"allowPublicTraffic": sb.trafficToken == ""}
		if egress != nil && !egress.Open {
			r := networkRules(*egress)
			network["allowOut"], network["denyOut"] = r.AllowOut, r.DenyOut
		}
		d["network"] = network
	}
	return d
}

// created is Sandbox: the answer of create and connect.
func (s *Server) created(sb *sandbox) map[string]any {
	d := map[string]any{"templateID": sb.templateID, "sandboxID": sb.id, "clientID": "6532622b",
		"envdVersion": envdVersion, "domain": s.opts.Domain}
	if sb.alias != "" {
		d["alias"] = sb.alias
	}
	if sb.envdToken != "" {
		d["envdAccessToken"] = sb.envdToken
	}
	if sb.trafficToken != "" {
		d["trafficAccessToken"] = sb.trafficToken
	} else {
		d["trafficAccessToken"] = nil
	}
	return d
}

// envdVersion is the envd version sandboxes report: the newest whose
// features (as the official SDKs gate them: closing stdin, octet-stream
// uploads) the emulator has; file metadata (0.6.2) it has not.
const envdVersion = "0.5.7"

// abort ends a handler's response abruptly, as a proxy does when the
// sandbox behind it goes: the client sees the connection cut.
func abort() { panic(http.ErrAbortHandler) }

// stateOf is a sandbox's SandboxState; s.mu is held.
func stateOf(sb *sandbox) string {
	if sb.paused {
		return "paused"
	}
	return "running"
}

// pause freezes a running sandbox's container, as a pause keeps a
// microVM's memory: its timeout stops while it is paused. It reports
// false when the sandbox was paused already.
func (s *Server) pause(ctx context.Context, sb *sandbox) (bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if sb.paused {
		return false, nil
	}
	if err := s.boxes.Freeze(ctx, sb.id); err != nil {
		return false, fmt.Errorf("pause the sandbox's container: %w", err)
	}
	sb.paused = true
	if sb.timer != nil {
		sb.timer.Stop()
	}
	s.log.Info("sandbox paused", "sandbox", sb.id)
	return true, nil
}

// resume thaws a paused sandbox with timeout from now, reporting whether
// it was paused.
func (s *Server) resume(ctx context.Context, sb *sandbox, timeout time.Duration) (bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !sb.paused {
		return false, nil
	}
	if err := s.boxes.Thaw(ctx, sb.id); err != nil {
		return false, fmt.Errorf("resume the sandbox's container: %w", err)
	}
	sb.paused = false
	sb.timeout = timeout
	s.setTimeoutLocked(sb, time.Now().Add(timeout))
	s.log.Info("sandbox resumed", "sandbox", sb.id, "timeout", timeout)
	return true, nil
}
