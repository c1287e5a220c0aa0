package conformance

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"path"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/tangle-network/boxctl/provider"
	"github.com/tangle-network/boxctl/provider/sandbox"
	"github.com/tangle-network/boxctl/provider/sandbox/broker"
	"github.com/tangle-network/boxctl/vendors"
	"github.com/tangle-network/boxctl/vendors/boxmeta"
)

// boxLifetime is the lifetime the box.lifetime case asks for.
const boxLifetime = 7 * time.Minute

func boxCases() []Case {
	return []Case{
		{ID: "box.ready", run: readyCase,
			Description: "the bridge in a new box reports the harness ready within its deadline"},
		{ID: "box.pin", run: pinCase,
			Description: "the harness CLI in the box reports exactly its pinned version"},
		{ID: "box.secrets", run: secretsCase,
			Description: "after a turn that ran a tool, the bearer and the router key appear in no inspect data, log, printed reference, process or file of the box (behind a broker)"},
		{ID: "box.broker", run: brokerCase,
			Description: "the box's model token is refused on any route but the model APIs, from another box where the vendor tells boxes apart, and once the box is gone"},
		{ID: "box.clone", run: cloneCase,
			Description: "the workspace repository is cloned into the box at the asked ref"},
		{ID: "box.lifetime", run: lifetimeCase,
			Description: "the box's lifetime is set, finite and the one asked for, in its labels and in the box"},
		{ID: "box.destroy", run: boxDestroyCase,
			Description: "destroying the box is idempotent and leaves nothing with the run tag"},
	}
}

func readyCase(c *caseCtx) error {
	start := time.Now()
	req := c.createRequest()
	p, err := c.sandbox(nil)
	if err != nil {
		return err
	}
	desc := c.step("%s, ready timeout %v", c.describeCreate(req), c.r.o.ReadyTimeout)
	env, err := c.create(p, req)
	if err != nil {
		var nr *sandbox.NotReadyError
		var be *sandbox.BridgeExitError
		switch {
		case errors.As(err, &nr), errors.As(err, &be):
			return failErr(desc, fmt.Sprintf("backend %s ready within %v", c.h.Name(), c.r.o.ReadyTimeout), errors.Unwrap(err))
		}
		return err
	}
	c.note("ready in %v (deadline %v) in box %s", time.Since(start).Round(time.Millisecond), c.r.o.ReadyTimeout, env.Reference().BoxID)
	return nil
}

func pinCase(c *caseCtx) error {
	pin := c.h.Pin
	if p, ok := c.r.t.Pins.Harness(pin.Name); ok {
		pin = *p
	}
	want := fmt.Sprintf("version %s (matching %s)", pin.Version, pin.VersionPattern)
	req := c.createRequest()
	env, err := c.create(nil, req)
	if err != nil {
		var pm *sandbox.PinMismatchError
		if errors.As(err, &pm) {
			return failf(c.describeCreate(req), want, "the box's %s reports %q", pm.Harness, pm.Reported)
		}
		return err
	}
	desc := c.step("Box.Exec(%s) in box %s", strings.Join(pin.VersionCommand, " "), env.Reference().BoxID)
	res, err := env.Box().Exec(c.ctx, vendors.ExecSpec{Command: pin.VersionCommand})
	if err != nil || res.ExitCode != 0 {
		return failf(desc, want, "exit %d %q, %v", res.ExitCode, res.Stderr, err)
	}
	got := strings.TrimSpace(string(res.Stdout))
	if re, err := regexp.Compile(pin.VersionPattern); err != nil || !re.MatchString(got) {
		return failf(desc, want, "%q", got)
	}
	c.note("%s reports %q", pin.Binary, got)
	return nil
}

// syncBuffer is a bytes.Buffer safe for concurrent writes.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func secretsCase(c *caseCtx) error {
	var logs syncBuffer
	p, err := c.sandbox(func(o *sandbox.Options) {
		o.Logger = slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
		o.BridgeEnv = map[string]string{"BRIDGE_LOG_LEVEL": "debug"}
	})
	if err != nil {
		return err
	}
	env, err := c.create(p, c.createRequest())
	if err != nil {
		return err
	}
	// A turn that ran a tool: the tool's process had the harness's
	// environment.
	if err := toolTurn(c, env, toolPrompt(c.h, "env > /tmp/conformance-env")); err != nil {
		return err
	}
	ref := env.Reference()
	box := env.Box()
	seen := map[string]string{}
	var checked []string
	if in, ok := c.r.t.Vendor.(Inspector); ok {
		raw, err := in.Inspect(c.ctx, box.ID())
		if err != nil {
			return failf(c.step("Inspect(%s)", box.ID()), "the vendor's inspect data", "%v", err)
		}
		seen["the vendor's inspect data"] = string(raw)
	}
	info, err := box.Status(c.ctx)
	if err != nil {
		return failf(c.step("Box.Status"), "the box's description", "%v", err)
	}
	seen["the box's description and labels"] = fmt.Sprintf("%+v %v", info, info.Labels)
	stdout, stderr, err := env.BridgeLog(c.ctx)
	if err != nil {
		return failf(c.step("BridgeLog"), "the bridge's log", "%v", err)
	}
	if !bytes.Contains(append(stdout, stderr...), []byte("level=")) {
		return failf("BridgeLog", "the bridge's log lines", "%q", clip(string(stderr), 300))
	}
	seen["the bridge's log"] = string(stdout) + string(stderr)
	seen["the provider's debug log"] = logs.String()
	seen["the printed reference"] = fmt.Sprint(ref) + fmt.Sprintf(" %v %+v %#v %s", ref, ref, ref, ref)
	res, err := box.Exec(c.ctx, vendors.ExecSpec{Command: []string{"sh", "-c",
		`for p in /proc/[0-9]*; do cat "$p/environ" "$p/cmdline" 2>/dev/null; done | tr '\0' '\n'`}})
	if err != nil || res.ExitCode != 0 || len(res.Stdout) == 0 {
		return failf(c.step("Box.Exec(read every process's environ and cmdline)"), "what the box's user can read", "exit %d %q, %v", res.ExitCode, res.Stderr, err)
	}
	procs := "the processes the box's user can read (/proc environ, cmdline)"
	secrets := map[string]string{"bearer": ref.Bearer, "router key": c.r.t.Router.Key}
	if c.r.t.Broker == nil {
		// Without a broker the harness holds the router key itself; the
		// bearer no process of the box's user may read.
		if strings.Contains(string(res.Stdout), ref.Bearer) {
			return failf("look for the bearer in "+procs, "no trace of it", "the bearer appears there")
		}
		checked = append(checked, procs+" (bearer; no broker, so the harness holds the router key)")
	} else {
		seen[procs] = string(res.Stdout)
		// Every file of the box (but /proc and /sys), its workspace, the
		// bridge's store and log and what the tool wrote among them,
		// searched for the key by a pattern that matches it, so that the
		// search's own command line does not hold it.
		key := c.r.t.Router.Key
		pattern := regexp.QuoteMeta(key[:1]) + "[" + regexp.QuoteMeta(key[1:2]) + "]" + regexp.QuoteMeta(key[2:])
		files, err := box.Exec(c.ctx, vendors.ExecSpec{Command: []string{"sh", "-c",
			`grep -rIl --exclude-dir=proc --exclude-dir=sys -e "$0" / 2>/dev/null; true`, pattern}})
		if err != nil {
			return failf(c.step("Box.Exec(search every file for the router key)"), "the search's answer", "%v", err)
		}
		if f := strings.TrimSpace(string(files.Stdout)); f != "" {
			return failf("look for the router key in the box's files", "no trace of it", "it is in %s", oneLine(f, 200))
		}
		checked = append(checked, "every file of the box but /proc and /sys")
	}
	for _, where := range slices.Sorted(maps.Keys(seen)) {
		checked = append(checked, where)
		for _, name := range slices.Sorted(maps.Keys(secrets)) {
			if strings.Contains(seen[where], secrets[name]) {
				return failf("look for the "+name+" in "+where, "no trace of it", "the %s appears there", name)
			}
		}
	}
	c.note("searched %s", strings.Join(checked, "; "))
	return nil
}

func cloneCase(c *caseCtx) error {
	repo := c.r.t.Repo
	if repo == nil {
		return skip("workspace repository", "no repository to clone was given (run with the local endpoint, or name one)")
	}
	req := c.createRequest()
	req.Workspace = &sandbox.WorkspaceRepo{RepoURL: repo.URL, GitRef: repo.GitRef}
	env, err := c.create(nil, req)
	if err != nil {
		return err
	}
	box := env.Box()
	if repo.File != "" {
		name := path.Join(sandbox.Workspace, repo.File)
		desc := c.step("Box.Read(%s) after cloning %s at %q", name, repo.URL, repo.GitRef)
		b, err := box.Read(c.ctx, name)
		if err != nil || string(b) != repo.Content {
			return failf(desc, fmt.Sprintf("%q", repo.Content), "%q, %v", b, err)
		}
		return nil
	}
	desc := c.step("Box.Exec(git rev-parse HEAD) in %s", sandbox.Workspace)
	res, err := box.Exec(c.ctx, vendors.ExecSpec{Command: []string{"git", "rev-parse", "HEAD"}, Dir: sandbox.Workspace})
	if err != nil || res.ExitCode != 0 {
		return failf(desc, "a checked-out commit", "exit %d %q, %v", res.ExitCode, res.Stderr, err)
	}
	c.note("checked out %s", strings.TrimSpace(string(res.Stdout)))
	return nil
}

func lifetimeCase(c *caseCtx) error {
	req := c.createRequest()
	req.Lifetime = boxLifetime
	start := time.Now()
	env, err := c.create(nil, req)
	if err != nil {
		return err
	}
	desc := c.describeCreate(req) + fmt.Sprintf(", lifetime %v", boxLifetime)
	dl := env.Reference().Deadline
	latest := start.Add(boxLifetime + 2*time.Second)
	if dl.IsZero() || !dl.After(time.Now()) || dl.After(latest) {
		return failf(desc, fmt.Sprintf("a deadline after now and by %s", latest.UTC().Format(time.RFC3339)), "deadline %v", dl)
	}
	info, err := env.Box().Status(c.ctx)
	if err != nil {
		return failf(c.step("Box.Status"), "the box's description", "%v", err)
	}
	label := info.Labels[boxmeta.LabelDeadline]
	ld, err := boxmeta.ParseDeadline(label)
	if err != nil || ld.Sub(info.Deadline).Abs() > time.Second || ld.Sub(dl).Abs() > time.Second {
		return failf("Box.Status", fmt.Sprintf("label %s naming deadline %v", boxmeta.LabelDeadline, dl), "label %q (%v), deadline %v", label, err, info.Deadline)
	}
	// The image's init ends the box at BOX_DEADLINE where the vendor sets
	// it; a vendor that ends boxes itself may set a later backstop there,
	// never an earlier one.
	res, err := env.Box().Exec(c.ctx, vendors.ExecSpec{Command: []string{"sh", "-c", "printf %s \"$" + boxmeta.EnvDeadline + "\""}})
	got := strings.TrimSpace(string(res.Stdout))
	if err != nil || res.ExitCode != 0 {
		return failf(c.step("Box.Exec(echo $%s)", boxmeta.EnvDeadline), "the box's deadline", "exit %d, %v", res.ExitCode, err)
	}
	if got == "" {
		c.note("the vendor ends the box itself (no %s in it)", boxmeta.EnvDeadline)
		return nil
	}
	bd, err := boxmeta.ParseDeadline(got)
	switch {
	case err != nil || bd.Before(ld.Add(-time.Second)):
		return failf("Box.Exec(echo $"+boxmeta.EnvDeadline+")", "a deadline no earlier than the label's "+label, "%q", got)
	case bd.Sub(ld).Abs() <= time.Second:
		c.note("the box's init ends it at its deadline %s (%s)", ld.UTC().Format(time.RFC3339), boxmeta.EnvDeadline)
	default:
		c.note("the vendor ends the box at %s; the box's init at %s, later, as a backstop", ld.UTC().Format(time.RFC3339), bd.UTC().Format(time.RFC3339))
	}
	return nil
}

func boxDestroyCase(c *caseCtx) error {
	env, err := c.env()
	if err != nil {
		return err
	}
	box, v := env.Box(), c.r.t.Vendor
	req := c.step("Box.Destroy(%s)", box.ID())
	if err := box.Destroy(c.ctx); err != nil {
		return failf(req, "no error", "%v", err)
	}
	req = c.step("Box.Destroy(%s) again", box.ID())
	if err := box.Destroy(c.ctx); err != nil {
		return failf(req, "no error: destroy is idempotent", "%v", err)
	}
	req = c.step("Vendor.Connect(%s)", box.ID())
	if _, err := v.Connect(c.ctx, box.ID()); !errors.Is(err, vendors.ErrNotFound) {
		return failf(req, "vendors.ErrNotFound", "%v", err)
	}
	req = c.step("Vendor.List(run tag %s)", c.runTag)
	left, err := v.List(c.ctx, map[string]string{boxmeta.LabelRunTag: c.runTag})
	if err != nil || len(left) != 0 {
		return failf(req, "no box", "%d boxes (%v), %v", len(left), left, err)
	}
	return nil
}

// presentScript presents $TOKEN to $URL$ROUTE as an Anthropic Messages
// request and prints the status and the broker's refusal ("-" for none).
const presentScript = `node -e '
fetch(process.env.URL + process.env.ROUTE, {method: "POST", headers: {"x-api-key": process.env.TOKEN,
  "content-type": "application/json", "anthropic-version": "2023-06-01"},
  body: JSON.stringify({model: "m", max_tokens: 8, messages: [{role: "user", content: "hi"}]})})
  .then(r => console.log(r.status, r.headers.get("x-boxctl-broker-refusal") || "-"), e => console.log("error", e.message))'`

func brokerCase(c *caseCtx) error {
	t := c.r.t
	if t.Broker == nil {
		return skip("a credential broker", "the vendor's boxes reach no broker of this run (no host address): they hold the Router's key")
	}
	a, err := c.create(nil, c.createRequest())
	if err != nil {
		return err
	}
	b, err := c.create(nil, c.createRequest())
	if err != nil {
		return err
	}
	// The token the box's harness holds, as one who read it would: a
	// grant of the same box rotates it.
	token, err := t.Broker.Grant(c.ctx, broker.Grant{Box: a.Box().ID()})
	if err != nil {
		return failf(c.step("Broker.Grant(%s)", a.Box().ID()), "a token", "%v", err)
	}
	present := func(from *sandbox.Environment, tok, route, want string) error {
		req := c.step("present the token from box %s on %s", from.Box().ID(), route)
		res, err := from.Box().Exec(c.ctx, vendors.ExecSpec{Command: []string{"sh", "-c", presentScript},
			Env: map[string]string{"URL": t.BrokerURL, "ROUTE": route, "TOKEN": tok}})
		if err != nil {
			return failf(req, want, "%v", err)
		}
		if got := strings.TrimSpace(string(res.Stdout)); got != want {
			return failf(req, want, "%s %s", got, strings.TrimSpace(string(res.Stderr)))
		}
		return nil
	}
	if err := present(a, token, "/v1/files", "403 "+string(broker.RefusedRoute)); err != nil {
		return err
	}
	if _, ok := a.Box().(vendors.Addressed); ok {
		if err := present(b, token, "/v1/messages", "403 "+string(broker.RefusedSource)); err != nil {
			return err
		}
	} else {
		c.note("the vendor does not tell the broker a box's address: a token is not bound to its box")
	}
	if err := a.Destroy(c.ctx); err != nil {
		return failf(c.step("Destroy(%s)", a.Box().ID()), "the box gone", "%v", err)
	}
	return present(b, token, "/v1/messages", "401 "+string(broker.RefusedRevoked))
}

// toolTurn dispatches a turn that runs a tool and reads its events to the
// end, allowing once each permission the harness asks for (a harness of
// retained sessions asks before its tools run).
func toolTurn(c *caseCtx, env *sandbox.Environment, prompt string) error {
	req := c.step("Dispatch(%q), allowing its tool", prompt)
	ref, err := env.Dispatch(c.ctx, provider.Turn{Prompt: prompt})
	if err != nil {
		return failf(req, "an admitted run", "%v", err)
	}
	s, err := env.Session(ref.ID, provider.SessionOptions{ControlRef: &ref.ControlRef})
	if err != nil {
		return failf(req, "the run's session", "%v", err)
	}
	for ev, err := range s.Events(c.ctx, "0") {
		if err != nil {
			return failf(req, "the run's events to its end", "%v", err)
		}
		if ev.Type == provider.EventInteraction && ev.Interaction != nil {
			cmd, err := provider.NewInteractionCommand(newID("conformance-allow"), *ev.Interaction, allow(ev.Interaction))
			if err == nil {
				_, err = s.RespondToInteraction(c.ctx, cmd)
			}
			if err != nil {
				return failf(req, "the tool allowed", "%v", err)
			}
		}
	}
	res, err := s.Result(c.ctx)
	if err != nil || !res.Success {
		return failf(req, "a completed run", "%s (%s), %v", res.Status, res.Error, err)
	}
	return nil
}
