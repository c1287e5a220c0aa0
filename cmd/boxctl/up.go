package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/tangle-network/boxctl/pins"
	"github.com/tangle-network/boxctl/provider"
	"github.com/tangle-network/boxctl/provider/sandbox"
	"github.com/tangle-network/boxctl/vendors"
	"github.com/tangle-network/boxctl/vendors/docker"
)

// The Router's environment: its URL and the key (never a flag).
const (
	routerURLEnv = "TANGLE_ROUTER_URL"
	routerKeyVar = "TANGLE_API_KEY"
)

// routerLocal is the --router value that starts a local model endpoint.
const routerLocal = "local"

// routerMargin is how long a local model endpoint outlives its box's
// lifetime, for a box created a moment after the endpoint started.
const routerMargin = time.Minute

// upOptions are the flags of `boxctl up`.
type upOptions struct {
	target     string
	image      string
	harness    string
	model      string
	repo       string
	gitRef     string
	lifetime   time.Duration
	router     string
	showBearer bool

	// Resolved by resolve: the Router, unless routerLocal.
	routerURL, routerKey string
}

func newUpCmd(a *app, runF func(context.Context, *upOptions) error) *cobra.Command {
	o := &upOptions{target: docker.Name, harness: "claude-code", lifetime: sandbox.DefaultLifetime}
	cmd := &cobra.Command{
		Use:   "up",
		Short: "Create a box with the bridge inside and remember it",
		Long: `up creates a box from a box image (default: the last ` + "`boxctl build`" + ` for --target),
starts the bridge in it with a random bearer and the Router's key, waits until
the harness is ready, and records the box in the state file so that turn, exec,
logs and rm can find it by id, id prefix or "last". It prints the box's id,
endpoint, harness and deadline; the bearer only with --show-bearer.

The model Router is --router URL with the key in $` + routerKeyVar + `, else $` + routerURLEnv + `
and $` + routerKeyVar + `. --router local instead runs a local model endpoint
(boxctl router-stub, with a random key) where the box reaches it, for as long as
the box lives.

The state file is $` + stateEnv + `, else $XDG_STATE_HOME/boxctl/boxes.json, else
~/.local/state/boxctl/boxes.json (mode 0600: it holds each box's bearer).`,
		Example: `  boxctl up --router local
  TANGLE_ROUTER_URL=https://router.tangle.tools TANGLE_API_KEY=... boxctl up --model sonnet
  boxctl up --repo https://github.com/octocat/Hello-World --git-ref master --lifetime 1h -o json`,
		Args: boxArgs(cobra.NoArgs),
		RunE: verbRunE(a, o, func([]string) error { return o.resolve(os.Getenv) }, runF, runUp),
	}
	f := cmd.Flags()
	f.StringVar(&o.target, "target", o.target, "where the box runs: "+strings.Join(boxTargets, ", "))
	f.StringVar(&o.image, "image", "", "box image (default: the last boxctl build for --target; kubernetes takes a registry build)")
	f.StringVar(&o.harness, "harness", o.harness, "the harness the bridge runs")
	f.StringVar(&o.model, "model", "", "the profile's default model (default: the harness's)")
	f.StringVar(&o.repo, "repo", "", "git repository to clone into the box's workspace")
	f.StringVar(&o.gitRef, "git-ref", "", "branch, tag or commit of --repo to check out")
	f.DurationVar(&o.lifetime, "lifetime", o.lifetime, "how long the box lives; it ends by itself then")
	f.StringVar(&o.router, "router", "", `model Router URL (key in $`+routerKeyVar+`), or "local" for a local model endpoint (default: $`+routerURLEnv+`)`)
	f.BoolVar(&o.showBearer, "show-bearer", false, "also print the bridge's bearer token (a secret)")
	_ = cmd.RegisterFlagCompletionFunc("target", cobra.FixedCompletions(boxTargets, cobra.ShellCompDirectiveNoFileComp))
	return cmd
}

// resolve checks the flags and finds the Router; getenv reads the
// environment.
func (o *upOptions) resolve(getenv func(string) string) error {
	if err := checkBoxTarget(o.target); err != nil {
		return err
	}
	switch {
	case o.lifetime < time.Second:
		return usageErrorf("--lifetime %v: want at least 1s: every box ends", o.lifetime)
	case o.lifetime > vendors.MaxLifetime:
		return usageErrorf("--lifetime %v: the longest is %v", o.lifetime, vendors.MaxLifetime)
	case o.gitRef != "" && o.repo == "":
		return usageErrorf("--git-ref goes with --repo")
	case strings.HasPrefix(o.repo, "-") || strings.HasPrefix(o.gitRef, "-"):
		return usageErrorf("--repo and --git-ref must not start with '-'")
	}
	p, err := pins.Load()
	if err != nil {
		return err
	}
	if _, ok := p.Harness(o.harness); !ok {
		return usageErrorf("--harness %q: known harnesses are %s", o.harness, strings.Join(harnessNames(p), ", "))
	}
	o.routerURL, o.routerKey, err = routerFromFlag(o.router, getenv)
	return err
}

// routerFromFlag finds the Router of a --router flag: none for "local"
// (the caller starts the local endpoint), else the flag's URL or
// $TANGLE_ROUTER_URL, with the key from $TANGLE_API_KEY. getenv reads the
// environment. What is missing or malformed is a usage error that says
// what to set.
func routerFromFlag(router string, getenv func(string) string) (url, key string, err error) {
	if router == routerLocal {
		return "", "", nil
	}
	url, key = router, getenv(routerKeyVar)
	var missing []string
	if url == "" {
		if url = getenv(routerURLEnv); url == "" {
			missing = append(missing, routerURLEnv)
		}
	}
	if key == "" {
		missing = append(missing, routerKeyVar)
	}
	switch {
	case len(missing) == 0:
	case router != "":
		return "", "", usageErrorf("no key for the Router: --router URL takes it from %s, which is not set; set it, "+
			"or pass --router local for a local model endpoint", routerKeyVar)
	case len(missing) == 2:
		return "", "", usageErrorf("no model Router: %s and %s are not set; set both, or pass --router local for a local model endpoint",
			routerURLEnv, routerKeyVar)
	default:
		return "", "", usageErrorf("no model Router: %s is not set; set it, or pass --router local for a local model endpoint", missing[0])
	}
	if err := sandbox.CheckRouterURL(url); errors.Is(err, sandbox.ErrRouterURLCredentials) {
		return "", "", usageErrorf("Router URL %v: the key goes in $%s", err, routerKeyVar)
	} else if err != nil {
		return "", "", usageErrorf("Router URL %q: %v", url, err)
	}
	return url, key, nil
}

// upResult is what `up` prints.
type upResult struct {
	ID       string    `json:"id"`
	Target   string    `json:"target"`
	Endpoint string    `json:"endpoint"`
	Harness  string    `json:"harness"`
	Model    string    `json:"model,omitempty"`
	Image    string    `json:"image"`
	RunTag   string    `json:"runTag"`
	Lifetime string    `json:"lifetime"`
	Deadline time.Time `json:"deadline"`
	Router   string    `json:"router"`
	Bearer   string    `json:"bearer,omitempty"`
}

func runUp(ctx context.Context, a *app, o *upOptions) error {
	sf, err := openState()
	if err != nil {
		return err
	}
	if o.image == "" {
		st, err := sf.load()
		if err != nil {
			return err
		}
		if st.LastBuild == nil || st.LastBuild.Target != buildTargetOf(o.target) {
			return usageErrorf("no box image: pass --image REF, or build one with `boxctl build --target %s`", buildTargetOf(o.target))
		}
		o.image = st.LastBuild.Image
	}
	v, closeVendor, err := a.openVendor(o.target)
	if err != nil {
		return err
	}
	defer closeVendor()

	now := time.Now()
	rec := boxRecord{Target: o.target, Image: o.image, RunTag: sandbox.NewRunTag(), Created: now.UTC(), Deadline: now.Add(o.lifetime).UTC()}
	router := sandbox.Router{URL: o.routerURL, Key: o.routerKey}
	if o.router == routerLocal {
		lr, key, err := startRouterFor(ctx, v, sf, rec.RunTag, now.Add(o.lifetime+routerMargin))
		if err != nil {
			return err
		}
		rec.Router, router = lr, sandbox.Router{URL: lr.URL, Key: key}
		a.log.Info("local model endpoint started", "url", lr.URL, "pid", lr.PID)
	}
	// The record goes in before the box exists, by run tag, so that a gc
	// running meanwhile keeps the box.
	if err := sf.update(ctx, func(st *boxState) error { st.Boxes = append(st.Boxes, rec); return nil }); err != nil {
		stopRouter(a, rec.Router)
		return err
	}
	env, err := createBox(ctx, a, v, o, rec.RunTag, router)
	if err == nil {
		ref := env.Reference()
		_ = env.Close(context.WithoutCancel(ctx))
		rec.ID, rec.Reference = ref.BoxID, &ref
		if !ref.Deadline.IsZero() {
			rec.Deadline = ref.Deadline.UTC()
		}
		err = sf.update(ctx, func(st *boxState) error {
			if r := st.findRunTag(rec.RunTag); r != nil {
				*r = rec
			} else {
				st.Boxes = append(st.Boxes, rec)
			}
			return nil
		})
		if err != nil {
			err = errors.Join(fmt.Errorf("record box %s: %w", shortID(ref.BoxID), err), destroyBox(ctx, v, ref.BoxID))
		}
	}
	if err != nil {
		cctx := context.WithoutCancel(ctx)
		stopRouter(a, rec.Router)
		if ferr := sf.update(cctx, func(st *boxState) error {
			st.remove(func(r *boxRecord) bool { return r.RunTag == rec.RunTag })
			return nil
		}); ferr != nil {
			a.log.Warn("could not forget the failed box in the state", "run", rec.RunTag, "err", ferr)
		}
		return err
	}
	return printUp(a, o, rec)
}

// startRouterFor starts the local model endpoint of the box with run tag
// tag, where the vendor's boxes reach it.
func startRouterFor(ctx context.Context, v vendors.Vendor, sf stateFile, tag string, until time.Time) (*localRouter, string, error) {
	ha, ok := v.(hostAddresser)
	if !ok {
		return nil, "", usageErrorf("--router local: boxes on %s cannot reach this machine; pass --router URL", v.Name())
	}
	host, err := ha.HostAddress(ctx)
	if err != nil {
		return nil, "", fmt.Errorf("local model endpoint: %w", err)
	}
	key := newRouterKey()
	logPath := filepath.Join(filepath.Dir(sf.path), "routers", tag+".log")
	lr, err := startLocalRouter(ctx, host, key, until, logPath)
	return lr, key, err
}

// createBox makes the box through the sandbox provider.
func createBox(ctx context.Context, a *app, v vendors.Vendor, o *upOptions, tag string, router sandbox.Router) (*sandbox.Environment, error) {
	p, err := sandbox.New(sandbox.Options{Vendor: v, Image: o.image, Router: router, Lifetime: o.lifetime,
		RunTag: tag, Owner: stateOwner(), Logger: a.log})
	if err != nil {
		return nil, err
	}
	req := sandbox.CreateRequest{Profile: provider.Profile{Harness: o.harness, Model: provider.ProfileModel{Default: o.model}},
		Lifetime: o.lifetime}
	if o.repo != "" {
		req.Workspace = &sandbox.WorkspaceRepo{RepoURL: o.repo, GitRef: o.gitRef}
	}
	a.log.Info("creating box", "target", o.target, "image", o.image, "harness", o.harness, "lifetime", o.lifetime)
	env, err := p.Create(ctx, req)
	if errors.Is(err, pins.ErrUnknownHarness) {
		return nil, usageError{err}
	}
	return env, err
}

// destroyBox removes box id, on a context Ctrl-C does not end.
func destroyBox(ctx context.Context, v vendors.Vendor, id string) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), sandbox.DefaultDestroyTimeout)
	defer cancel()
	b, err := v.Connect(ctx, id)
	if errors.Is(err, vendors.ErrNotFound) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("destroy box %s: %w", shortID(id), err)
	}
	if err := b.Destroy(ctx); err != nil {
		return fmt.Errorf("destroy box %s: %w", shortID(id), err)
	}
	return nil
}

// stopRouter stops a local model endpoint, if there is one, and removes
// its log; it logs a failure.
func stopRouter(a *app, r *localRouter) {
	if r == nil {
		return
	}
	if err := r.stop(); err != nil {
		a.log.Warn("local model endpoint not stopped", "pid", r.PID, "err", err)
		return
	}
	if r.Log != "" {
		_ = os.Remove(r.Log)
	}
}

func printUp(a *app, o *upOptions, rec boxRecord) error {
	ref := rec.Reference
	res := upResult{ID: rec.ID, Target: rec.Target, Endpoint: ref.Endpoint, Harness: ref.Harness, Model: o.model,
		Image: rec.Image, RunTag: rec.RunTag, Lifetime: o.lifetime.String(), Deadline: rec.Deadline, Router: o.routerURL}
	if rec.Router != nil {
		res.Router = rec.Router.URL
	}
	if o.showBearer {
		res.Bearer = ref.Bearer
	}
	return a.print(res, func(w io.Writer) error {
		model := res.Model
		if model == "" {
			model = "(the harness's default)"
		}
		router := res.Router
		if rec.Router != nil {
			router += " (local model endpoint, pid " + fmt.Sprint(rec.Router.PID) + ")"
		}
		lines := [][2]string{{"id", res.ID}, {"endpoint", res.Endpoint}, {"harness", res.Harness}, {"model", model},
			{"image", res.Image}, {"run tag", res.RunTag},
			{"deadline", res.Deadline.Local().Format(time.RFC3339) + " (lifetime " + res.Lifetime + ")"}, {"router", router}}
		if o.showBearer {
			lines = append(lines, [2]string{"bearer", res.Bearer})
		}
		for _, l := range lines {
			if _, err := fmt.Fprintf(w, "%-9s %s\n", l[0], l[1]); err != nil {
				return err
			}
		}
		return nil
	})
}
