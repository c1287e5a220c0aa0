package boximage

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/moby/buildkit/client"
	"github.com/moby/buildkit/exporter/containerimage/exptypes"
	"github.com/moby/buildkit/session"
	"github.com/moby/buildkit/solver/pb"
	"github.com/moby/buildkit/util/progress/progressui"
	"github.com/tonistiigi/fsutil"
	"golang.org/x/sync/errgroup"

	"github.com/tangle-network/boxctl/internal/dockerclient"
)

// Progress display modes, as BuildKit names them.
const (
	ProgressAuto  = "auto"
	ProgressTTY   = "tty"
	ProgressPlain = "plain"
	ProgressQuiet = "quiet"
)

// buildkitAddr resolves a buildkitd address: addr, else $BUILDKIT_HOST,
// else none (the Docker engine's own BuildKit).
func buildkitAddr(addr string) string {
	if addr != "" {
		return addr
	}
	return os.Getenv("BUILDKIT_HOST")
}

// BuildOptions describes one image build. Zero values mean defaults.
type BuildOptions struct {
	// BuildkitAddr is the buildkitd address: unix:///PATH, tcp://HOST:PORT,
	// or one of BuildKit's connection helpers, docker-container://NAME
	// (buildkitd in a container, through `docker exec`) and
	// kube-pod://NAME?namespace=NS (in a pod, through kubectl). Default
	// $BUILDKIT_HOST, else none: the Docker engine's own BuildKit (see
	// DockerHost).
	BuildkitAddr string
	// DockerHost is the Docker engine whose own BuildKit builds when no
	// buildkitd is named. Default DOCKER_HOST, else the local socket. A
	// DockerExporter builds on its own engine; naming another here is an
	// error.
	DockerHost string
	// Dockerfile is the Dockerfile text. Required.
	Dockerfile []byte
	// ContextDir is the build context (the bridge binary, lockfiles).
	// Default an empty context.
	ContextDir string
	// BuildArgs are the Dockerfile's ARG values.
	BuildArgs map[string]string
	// Platform is the target platform ("linux/amd64"). Default the
	// builder's. More than one (comma-separated) needs a buildkitd, or an
	// engine with the containerd image store.
	Platform string
	// Progress receives BuildKit's progress display. Default discards.
	Progress io.Writer
	// ProgressMode is auto, tty, plain or quiet. Default auto.
	ProgressMode string
	// NoCache builds every step again.
	NoCache bool
	// CacheFrom and CacheTo are registry references of BuildKit cache
	// (mode=max on export), besides the builder's own local cache.
	// CacheTo needs a buildkitd, or an engine with the containerd image
	// store.
	CacheFrom, CacheTo []string
	// Auth logs in to registries by host; other hosts use the Docker
	// config (~/.docker/config.json and its credential helpers).
	Auth map[string]RegistryAuth
	// Insecure lists registry hosts spoken to over plain HTTP.
	Insecure []string
	// Log receives a line per phase. Default discards.
	Log *slog.Logger
	// ConnectTimeout bounds the wait for BuildKit to answer before the
	// build starts. Default 10s.
	ConnectTimeout time.Duration
}

// RegistryAuth is a registry login. It never prints its password.
type RegistryAuth struct {
	Username string `json:"-"`
	Password string `json:"-"`
}

// String hides the password.
func (a RegistryAuth) String() string { return "login(" + a.Username + ")" }

// Result is a built and exported image.
type Result struct {
	// Reference is where the image is: the Docker tag, or the pushed
	// reference with its digest (repo:tag@sha256:...).
	Reference string `json:"reference"`
	// Digest is the image manifest digest.
	Digest string `json:"digest"`
	// ImageID is the image config digest (the Docker image id).
	ImageID string `json:"imageID,omitempty"`
	// Size is the image size in bytes: compressed layers plus config and
	// manifest in a registry, unpacked size in the Docker engine.
	Size int64 `json:"size"`
	// Duration is how long the build and export took.
	Duration time.Duration `json:"duration"`
}

// Exporter is where a built image goes: the local Docker engine
// (DockerExporter) or a registry (RegistryExporter).
type Exporter interface {
	// forEngine returns the exporter that does the same on the Docker
	// engine's own BuildKit.
	forEngine(e *engine) (Exporter, error)
	// entry returns BuildKit's export entry.
	entry() client.ExportEntry
	// run does the exporter's own work while the build runs (for Docker,
	// loading the image stream); it returns when the export is consumed.
	// solved is closed when the solve has returned, with its error in err.
	run(ctx context.Context, solved <-chan struct{}, solveErr *error) error
	// result inspects the exported image.
	result(ctx context.Context, resp *client.SolveResponse, auth authLookup) (Result, error)
}

// Build builds opts.Dockerfile with BuildKit and hands the image to exp.
// The builder is the buildkitd opts.BuildkitAddr or $BUILDKIT_HOST names,
// else the Docker engine's own BuildKit, which writes a DockerExporter's
// image straight into the engine's store. Cancelling ctx cancels the
// build. Its errors are typed as the package documentation says:
// *BuildkitError, *EngineError, *PushError, *StepError.
func Build(ctx context.Context, opts BuildOptions, exp Exporter) (Result, error) {
	start := time.Now()
	if len(opts.Dockerfile) == 0 {
		return Result{}, errors.New("build: Dockerfile is empty")
	}
	if exp == nil {
		return Result{}, errors.New("build: no exporter")
	}
	opts, err := opts.withDefaults()
	if err != nil {
		return Result{}, err
	}
	mounts, remove, err := localMounts(opts)
	if err != nil {
		return Result{}, fmt.Errorf("build: %w", err)
	}
	defer remove()

	auth := newAuthLookup(opts.Auth)
	solveOpt := client.SolveOpt{
		Frontend:      "dockerfile.v0",
		FrontendAttrs: frontendAttrs(opts),
		LocalMounts:   mounts,
		CacheImports:  cacheEntries(opts.CacheFrom, opts.Insecure, false),
		CacheExports:  cacheEntries(opts.CacheTo, opts.Insecure, true),
	}

	b, err := connect(ctx, opts, exp)
	if err != nil {
		return Result{}, fmt.Errorf("build: %w", err)
	}
	defer b.close()
	c := b.c
	if b.eng != nil {
		opts.Log.Debug("build: on the Docker engine's BuildKit", "engine", b.eng.Host, "api", b.eng.APIVersion,
			"route", b.eng.Route, "containerd-store", b.eng.ContainerdStore)
		if err := b.eng.check(opts); err != nil {
			return Result{}, fmt.Errorf("build: %w", err)
		}
		if exp, err = exp.forEngine(b.eng); err != nil {
			return Result{}, fmt.Errorf("build: %w", err)
		}
		// As `docker build`: the engine's own images serve FROM first.
		solveOpt.FrontendAttrs["image-resolve-mode"] = pb.AttrImageResolveModePreferLocal
	}
	if pc, ok := exp.(pushChecker); ok {
		// A refused push fails now, not after the build.
		if err := pc.checkPush(ctx, auth); err != nil {
			return Result{}, fmt.Errorf("build: %w", err)
		}
	}

	var probeDigest string
	if r, ok := exp.(reuser); ok {
		res, digest, found, err := solveAndReuse(ctx, c, opts, solveOpt, auth, r)
		if err != nil {
			return Result{}, err
		}
		if found {
			res.Duration = time.Since(start)
			opts.Log.Debug("build: target already holds the image", "reference", res.Reference, "image", res.ImageID)
			return res, nil
		}
		probeDigest = digest
	}

	opts.Log.Debug("build: solving and exporting", "buildkit", b.addr(), "platform", opts.Platform)
	solveOpt.Exports = []client.ExportEntry{exp.entry()}
	solveOpt.Session = []session.Attachable{auth.provider()}
	resp, err := solve(ctx, c, opts, solveOpt, exp.run)
	if pc, ok := exp.(pushChecker); ok && err != nil {
		err = pc.pushError(ctx, err, auth)
	}
	if err != nil {
		return Result{}, err
	}
	res, err := exp.result(ctx, resp, auth)
	if err != nil {
		return Result{}, err
	}
	if probeDigest != "" {
		// The same digest whether or not the export was spared.
		res.Digest = probeDigest
	}
	if res.Digest == "" {
		res.Digest = resp.ExporterResponse[exptypes.ExporterImageDigestKey]
	}
	if res.ImageID == "" {
		res.ImageID = resp.ExporterResponse[exptypes.ExporterImageConfigDigestKey]
	}
	res.Duration = time.Since(start)
	opts.Log.Debug("build: done", "reference", res.Reference, "digest", res.Digest, "took", res.Duration)
	return res, nil
}

// withDefaults returns o with its buildkitd address (none for the Docker
// engine's BuildKit) and logger set, after checking its progress mode.
func (o BuildOptions) withDefaults() (BuildOptions, error) {
	o.BuildkitAddr = buildkitAddr(o.BuildkitAddr)
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	if _, err := newDisplay(o); err != nil {
		return BuildOptions{}, err
	}
	return o, nil
}

// localMounts returns the build's local sources, the context directory
// (an empty one when opts names none) and a directory holding
// opts.Dockerfile, and remove, which deletes what it made.
func localMounts(opts BuildOptions) (mounts map[string]fsutil.FS, remove func(), err error) {
	dfDir, err := os.MkdirTemp("", "boximage-dockerfile-")
	if err != nil {
		return nil, nil, err
	}
	defer func() {
		if err != nil {
			os.RemoveAll(dfDir)
		}
	}()
	if err := os.WriteFile(filepath.Join(dfDir, "Dockerfile"), opts.Dockerfile, 0o644); err != nil {
		return nil, nil, err
	}
	ctxDir := opts.ContextDir
	if ctxDir == "" {
		ctxDir = filepath.Join(dfDir, "empty")
		if err := os.Mkdir(ctxDir, 0o755); err != nil {
			return nil, nil, err
		}
	}
	ctxFS, err := fsutil.NewFS(ctxDir)
	if err != nil {
		return nil, nil, fmt.Errorf("context %s: %w", ctxDir, err)
	}
	dfFS, err := fsutil.NewFS(dfDir)
	if err != nil {
		return nil, nil, err
	}
	return map[string]fsutil.FS{"context": ctxFS, "dockerfile": dfFS}, func() { os.RemoveAll(dfDir) }, nil
}

// solveAndReuse builds into buildkitd only and asks r whether its target
// already holds this very image, so that the export can be skipped. It
// returns that image when found, and the built image's digest.
func solveAndReuse(ctx context.Context, c *client.Client, opts BuildOptions, so client.SolveOpt, auth authLookup, r reuser) (res Result, digest string, found bool, err error) {
	opts.Log.Debug("build: solving", "platform", opts.Platform)
	so.Exports = []client.ExportEntry{r.probe()}
	so.Session = []session.Attachable{auth.provider()}
	resp, err := solve(ctx, c, opts, so, nil)
	if err != nil {
		return Result{}, "", false, err
	}
	digest = resp.ExporterResponse[exptypes.ExporterImageDigestKey]
	res, found, err = r.reuse(ctx, resp)
	if err != nil {
		return Result{}, "", false, err
	}
	return res, digest, found, nil
}

// builder is a connected BuildKit: a buildkitd, or a Docker engine's own
// (eng).
type builder struct {
	c      *client.Client
	bkAddr string
	eng    *engine
	// closeDocker closes the engine's Docker client when the build made it.
	closeDocker func() error
}

// addr names the builder for logs.
func (b *builder) addr() string {
	if b.eng != nil {
		return "docker engine " + b.eng.Host + " (" + b.eng.Route + ")"
	}
	return b.bkAddr
}

func (b *builder) close() {
	b.c.Close()
	if b.closeDocker != nil {
		b.closeDocker()
	}
}

// connect dials the builder and waits, at most opts.ConnectTimeout, for it
// to answer, so that a wrong address fails in seconds with a
// *BuildkitError rather than in the middle of the build. The builder is
// the buildkitd at opts.BuildkitAddr, else the Docker engine's own
// BuildKit: the engine of exp when exp is a DockerExporter, else the one at
// opts.DockerHost.
func connect(ctx context.Context, opts BuildOptions, exp Exporter) (*builder, error) {
	timeout := opts.ConnectTimeout
	if timeout <= 0 {
		timeout = 10 * time.Second
	}
	if opts.BuildkitAddr == "" {
		return connectEngineOf(ctx, opts, exp, timeout)
	}
	c, err := client.New(ctx, opts.BuildkitAddr)
	if err != nil {
		return nil, &BuildkitError{Addr: opts.BuildkitAddr, Err: err}
	}
	ictx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	// ListWorkers rather than Info: buildkitd older than v0.11 lacks Info.
	if _, err := c.ListWorkers(ictx); err != nil {
		c.Close()
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		if ictx.Err() != nil {
			err = fmt.Errorf("no answer within %v: %w", timeout, err)
		}
		return nil, &BuildkitError{Addr: opts.BuildkitAddr, Err: err}
	}
	return &builder{c: c, bkAddr: opts.BuildkitAddr}, nil
}

// connectEngineOf connects to the Docker engine's own BuildKit: exp's
// engine for a DockerExporter, else opts.DockerHost's. The engine's Docker
// client lives as long as the builder.
func connectEngineOf(ctx context.Context, opts BuildOptions, exp Exporter, timeout time.Duration) (*builder, error) {
	if de, ok := exp.(*DockerExporter); ok {
		if opts.DockerHost != "" && opts.DockerHost != de.docker.DaemonHost() {
			return nil, fmt.Errorf("the image goes to the Docker engine at %s, but DockerHost names %s: "+
				"build on the image's engine, or name a buildkitd", de.docker.DaemonHost(), opts.DockerHost)
		}
		c, eng, err := connectEngine(ctx, de.docker, timeout)
		if err != nil {
			return nil, err
		}
		return &builder{c: c, eng: eng}, nil
	}
	d, err := dockerclient.New(opts.DockerHost)
	if err != nil {
		return nil, err
	}
	c, eng, err := connectEngine(ctx, d, timeout)
	if err != nil {
		d.Close()
		return nil, err
	}
	return &builder{c: c, eng: eng, closeDocker: d.Close}, nil
}

// pushChecker is an Exporter that pushes: Build checks before the build
// that the registry takes a push, and maps a failed push to a *PushError.
type pushChecker interface {
	checkPush(ctx context.Context, auth authLookup) error
	pushError(ctx context.Context, err error, auth authLookup) error
}

// reuser is an Exporter whose target may already hold the image: Build
// first solves with the probe export (into buildkitd only) and exports for
// real only when reuse finds nothing.
type reuser interface {
	probe() client.ExportEntry
	reuse(ctx context.Context, resp *client.SolveResponse) (res Result, found bool, err error)
}

func newDisplay(opts BuildOptions) (progressui.Display, error) {
	mode := progressui.DisplayMode(opts.ProgressMode)
	if opts.ProgressMode == "" {
		mode = progressui.AutoMode
	}
	out := opts.Progress
	if out == nil {
		out, mode = io.Discard, progressui.QuietMode
	}
	d, err := progressui.NewDisplay(out, mode)
	if err != nil {
		return progressui.Display{}, fmt.Errorf("build: progress %q: %w", opts.ProgressMode, err)
	}
	return d, nil
}

// solve runs one BuildKit solve with its progress display and, if run is
// not nil, the exporter's own work, all in one errgroup.
func solve(ctx context.Context, c *client.Client, opts BuildOptions, so client.SolveOpt,
	run func(ctx context.Context, solved <-chan struct{}, solveErr *error) error) (*client.SolveResponse, error) {
	display, err := newDisplay(opts)
	if err != nil {
		return nil, err
	}
	ch := make(chan *client.SolveStatus)
	shown := make(chan *client.SolveStatus)
	steps := newStepLogs()
	solved := make(chan struct{})
	var resp *client.SolveResponse
	var solveErr error
	eg, egCtx := errgroup.WithContext(ctx)
	eg.Go(func() error {
		// Solve closes ch when it returns.
		resp, solveErr = c.Solve(egCtx, nil, so, ch)
		close(solved)
		if solveErr != nil {
			return fmt.Errorf("build: %w", solveErr)
		}
		return nil
	})
	eg.Go(func() error {
		// tee closes shown when Solve has closed ch.
		steps.tee(ch, shown)
		return nil
	})
	eg.Go(func() error {
		// Not egCtx: the display must drain shown and show the failing step.
		_, err := display.UpdateFrom(context.WithoutCancel(ctx), shown)
		return err
	})
	if run != nil {
		eg.Go(func() error { return run(egCtx, solved, &solveErr) })
	}
	if err := eg.Wait(); err != nil {
		if cause := context.Cause(ctx); cause != nil {
			// Cancelled or past its deadline: say so in terms callers can
			// test with errors.Is, whatever BuildKit's stream reported.
			return nil, fmt.Errorf("build: %w (buildkit: %v)", cause, err)
		}
		if solveErr != nil { // the cause, rather than the export it broke
			return nil, fmt.Errorf("build: %w", steps.wrap(solveErr))
		}
		return nil, err
	}
	return resp, nil
}

func frontendAttrs(opts BuildOptions) map[string]string {
	attrs := map[string]string{"filename": "Dockerfile"}
	if opts.Platform != "" {
		attrs["platform"] = opts.Platform
	}
	if opts.NoCache {
		attrs["no-cache"] = ""
	}
	for k, v := range opts.BuildArgs {
		attrs["build-arg:"+k] = v
	}
	return attrs
}

func cacheEntries(refs, insecure []string, export bool) []client.CacheOptionsEntry {
	var out []client.CacheOptionsEntry
	for _, r := range refs {
		attrs := map[string]string{"ref": r}
		if export {
			attrs["mode"] = "max"
		}
		if isInsecure(r, insecure) {
			attrs["registry.insecure"] = "true"
		}
		out = append(out, client.CacheOptionsEntry{Type: "registry", Attrs: attrs})
	}
	return out
}
