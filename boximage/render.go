// Package boximage renders, builds and publishes box images.
//
// # Rendering
//
// Render turns pins (package pins) into a BuildKit build context: a
// Dockerfile, the init script box-init, and per harness a package.json and
// package-lock.json. The output is deterministic, and each pin sits on lines
// of its own, so a changed pin changes exactly the lines that carry it.
//
// The image is, in order: the base by digest; the pinned Debian packages
// (tini; bubblewrap, the bridge's jail) at exact versions, both checked to run; Node and npm from their npm tarballs, fetched in a
// per-platform stage (FROM node-${TARGETARCH}) and checked with sha512sum
// against the pinned integrity before use; a non-root user (box, uid 10001)
// owning /workspace; each selected harness; box-init; the static bridge
// binary copied from the build context as box-bridge; OCI labels plus one
// io.github.tangle-network.boxctl.* label per pin.
//
// Each harness gets its own install prefix, /opt/boxctl/harness/<name>, with
// a package.json that depends on the exact pinned version and a complete
// lockfileVersion 3 package-lock.json built from the harness's pinned tree;
// `npm ci` installs exactly that tree, verifying every tarball's integrity,
// or fails. One prefix per harness, rather than one merged lock, means two
// harnesses that need different versions of the same dependency never
// conflict, and adding or bumping one harness leaves the others' layers,
// lockfiles and caches untouched. The binary is linked into /usr/local/bin
// and its version command must print the pinned version at build time.
//
// The entrypoint is tini running box-init, which runs the command (default
// `sleep infinity`) under timeout(1) until BOX_DEADLINE (Unix seconds) or
// BOX_LIFETIME (seconds from start; the image sets a default): at the
// deadline the process group gets SIGTERM, then SIGKILL, and the box ends.
//
// # Builders
//
// Build runs on the buildkitd BuildOptions.BuildkitAddr or $BUILDKIT_HOST
// names (unix://, tcp://, or BuildKit's docker-container:// and kube-pod://
// helpers), else on the Docker engine's own BuildKit: through gRPC on the
// engine's socket for engines of API 1.53 and later, else through the
// engine's /grpc and /session routes upgraded to h2c (InspectEngine says
// which). On the engine, a DockerExporter writes the image straight into
// the engine's store and a RegistryExporter pushes from it. An engine
// without the containerd image store exports only into its own store: a
// registry push then goes through the engine after the build, and cache
// export and multi-platform builds are refused (*EngineError).
//
// # Errors
//
// Build fails in seconds with a *BuildkitError (ErrBuildkitUnreachable) when
// no BuildKit answers (a buildkitd, or the Docker engine), fails before
// building with an *EngineError (ErrEngineUnsupported) when the engine's
// BuildKit cannot do what is asked, and, for a registry target, checks before building
// that the registry takes a push: a refusal then or during the push is a
// *PushError (ErrPushDenied when the credentials are refused) carrying the
// registry's message with every credential removed. A failed step is a
// *StepError quoting what the step printed (npm's error lines); one whose
// output reports a hash mismatch (npm's EINTEGRITY) matches ErrIntegrity.
//
// # Publishing
//
// Publish builds an image with BuildOptions and publishes it to a
// PublishTarget: loaded into the local Docker engine, pushed to a registry
// (ECR, or a vendor's own), and for E2B and Daytona imported by the
// vendor's vendors.ImageImporter. It returns the build Record, whose
// CheckVendor says whether a vendor can start boxes from it.
//
// # Options
//
// Clients of outside APIs take functional options (NewECR with
// ECROption); our own steps take one struct (RenderOptions,
// BuildOptions, PublishTarget) whose zero values mean the defaults.
package boximage

import (
	"bytes"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/tangle-network/boxctl/pins"
)

// Paths in the rendered build context and in the image.
const (
	// BridgeFile is where the builder puts the static box-bridge binary in
	// the build context; Render does not write it.
	BridgeFile = "box-bridge"
	// InitFile is the rendered init script in the build context.
	InitFile = "box-init"
	// HarnessRoot holds one install prefix per harness in the image.
	HarnessRoot = "/opt/boxctl/harness"
	// LabelPrefix starts every boxctl pin label.
	LabelPrefix = "io.github.tangle-network.boxctl."
)

// RenderOptions configures Render. Its zero value renders the proven
// harnesses on the pinned base, for the pins' bridge, as user box (uid
// 10001) in /workspace with a one-hour default lifetime.
type RenderOptions struct {
	// Harnesses selects the harnesses by name or backend key
	// ("claude-code" or "claude"). Default: the proven ones.
	Harnesses []string
	// Base builds on another base image, such as the test bed's local one.
	// Its Debian packages replace the pinned ones. Default: the pinned base.
	Base *pins.Base
	// BridgeVersion and BridgeCommit record another bridge build than the
	// pins carry, for a bridge built from another tree; give both or
	// neither. Default: the pins' bridge (the running binary's own build).
	BridgeVersion, BridgeCommit string
	// User and UID name the non-root user the box runs as; give both or
	// neither. Default: box, uid 10001 (clear of the uid 1000 that many
	// base images already hand out).
	User string
	UID  int
	// Lifetime is the box lifetime used when the runtime sets neither
	// BOX_DEADLINE nor BOX_LIFETIME, in whole seconds. Default: one hour.
	Lifetime time.Duration
	// Workspace is the working directory the box user owns. Default:
	// /workspace.
	Workspace string
}

// renderOptions are RenderOptions with the defaults applied.
type renderOptions struct {
	harnesses     []string
	base          *pins.Base
	bridgeVersion string
	bridgeCommit  string
	user          string
	uid           int
	lifetime      time.Duration
	workspace     string
}

func makeRenderOptions(p *pins.Pins, opts RenderOptions) (renderOptions, error) {
	o := renderOptions{harnesses: opts.Harnesses, base: opts.Base, bridgeVersion: opts.BridgeVersion, bridgeCommit: opts.BridgeCommit,
		user: opts.User, uid: opts.UID, lifetime: opts.Lifetime, workspace: opts.Workspace}
	if o.user == "" && o.uid == 0 {
		o.user, o.uid = "box", 10001
	}
	if o.lifetime == 0 {
		o.lifetime = time.Hour
	}
	if o.workspace == "" {
		o.workspace = "/workspace"
	}
	bridgeOverride := o.bridgeVersion != "" || o.bridgeCommit != ""
	if !bridgeOverride {
		o.bridgeVersion, o.bridgeCommit = p.Bridge.Version, p.Bridge.Commit
	}
	var errs []error
	if o.base != nil {
		check := p.Clone()
		check.Base = *o.base
		if err := check.Validate(); err != nil {
			errs = append(errs, fmt.Errorf("base override: %w", err))
		}
	}
	if o.bridgeVersion == "" || o.bridgeCommit == "" || strings.ContainsAny(o.bridgeVersion+o.bridgeCommit, "\"\\\n ") {
		errs = append(errs, fmt.Errorf("bridge version %q and commit %q: want both, without spaces or quotes", o.bridgeVersion, o.bridgeCommit))
	}
	if !userRE(o.user) || o.uid < 1 || o.uid > 65533 {
		errs = append(errs, fmt.Errorf("user %q uid %d: want a lowercase name and a non-root uid", o.user, o.uid))
	}
	if o.lifetime < time.Second || o.lifetime%time.Second != 0 {
		errs = append(errs, fmt.Errorf("lifetime %v: want whole seconds, at least one", o.lifetime))
	}
	if !path.IsAbs(o.workspace) || path.Clean(o.workspace) != o.workspace || o.workspace == "/" || strings.ContainsAny(o.workspace, " \"'\\\n") {
		errs = append(errs, fmt.Errorf("workspace %q: want a clean absolute path", o.workspace))
	}
	return o, errors.Join(errs...)
}

func userRE(s string) bool {
	if s == "" || s == "root" || len(s) > 32 {
		return false
	}
	for i, c := range s {
		if !(c >= 'a' && c <= 'z' || c == '_' || i > 0 && (c >= '0' && c <= '9' || c == '-')) {
			return false
		}
	}
	return true
}

// Rendered is a build context: the Dockerfile and the files it copies,
// except the bridge binary (BridgeFile), which the builder adds.
type Rendered struct {
	// Dockerfile is the rendered Dockerfile.
	Dockerfile []byte
	// Files maps slash-separated context paths to contents: Dockerfile,
	// box-init and harness/<name>/package.json and package-lock.json.
	Files map[string][]byte
	// Harnesses are the harnesses installed, in pins order.
	Harnesses []pins.Harness
	// Labels are the image labels the Dockerfile sets; a builder may also
	// set them as OCI annotations.
	Labels map[string]string
}

// Render renders the build context of a box image from validated pins. The
// output depends only on p and opts: the same input gives the same bytes.
func Render(p *pins.Pins, opts RenderOptions) (*Rendered, error) {
	if err := p.Validate(); err != nil {
		return nil, fmt.Errorf("render: %w", err)
	}
	o, err := makeRenderOptions(p, opts)
	if err != nil {
		return nil, fmt.Errorf("render: %w", err)
	}
	hs, err := p.Select(o.harnesses)
	if err != nil {
		return nil, fmt.Errorf("render: %w", err)
	}
	base := p.Base
	if o.base != nil {
		base = *o.base
	}
	r := &Rendered{Files: map[string][]byte{InitFile: []byte(initScript)}, Harnesses: hs}
	for _, h := range hs {
		pkg, lock, err := RenderLockfile(h)
		if err != nil {
			return nil, fmt.Errorf("render: %w", err)
		}
		r.Files["harness/"+h.Name+"/package.json"] = pkg
		r.Files["harness/"+h.Name+"/package-lock.json"] = lock
	}
	r.Labels = labels(p, base, hs, o)
	r.Dockerfile, err = dockerfile(p, base, hs, r.Labels, o)
	if err != nil {
		return nil, fmt.Errorf("render: %w", err)
	}
	r.Files["Dockerfile"] = r.Dockerfile
	return r, nil
}

// RenderDockerfile renders only the Dockerfile; see Render.
func RenderDockerfile(p *pins.Pins, opts RenderOptions) ([]byte, error) {
	r, err := Render(p, opts)
	if err != nil {
		return nil, err
	}
	return r.Dockerfile, nil
}

// WriteDir writes every rendered file under dir, which becomes the build
// context once the bridge binary is copied in as BridgeFile.
func (r *Rendered) WriteDir(dir string) error {
	for _, name := range slices.Sorted(maps.Keys(r.Files)) {
		file := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(file), 0o755); err != nil {
			return fmt.Errorf("write build context: %w", err)
		}
		mode := os.FileMode(0o644)
		if name == InitFile {
			mode = 0o755
		}
		if err := os.WriteFile(file, r.Files[name], mode); err != nil {
			return fmt.Errorf("write build context: %w", err)
		}
	}
	return nil
}

// labels records every pin that went into the image.
func labels(p *pins.Pins, base pins.Base, hs []pins.Harness, o renderOptions) map[string]string {
	names := make([]string, len(hs))
	for i, h := range hs {
		names[i] = h.Name
	}
	debs := make([]string, len(base.Packages))
	for i, d := range base.Packages {
		debs[i] = d.Name + "=" + d.Version
	}
	l := map[string]string{
		"org.opencontainers.image.title":       "boxctl box",
		"org.opencontainers.image.description": "Harness CLIs (" + strings.Join(names, ", ") + ") behind the box-bridge HTTP contract",
		"org.opencontainers.image.source":      "https://github.com/tangle-network/boxctl",
		"org.opencontainers.image.version":     o.bridgeVersion,
		"org.opencontainers.image.revision":    o.bridgeCommit,
		"org.opencontainers.image.base.name":   base.Reference,
		"org.opencontainers.image.base.digest": base.Digest,
		LabelPrefix + "bridge.version":         o.bridgeVersion,
		LabelPrefix + "bridge.commit":          o.bridgeCommit,
		LabelPrefix + "node.version":           p.Node.Version,
		LabelPrefix + "npm.version":            p.Node.NPM.Version,
		LabelPrefix + "npm.integrity":          p.Node.NPM.Integrity,
		LabelPrefix + "harnesses":              strings.Join(names, ","),
		LabelPrefix + "user":                   o.user,
		LabelPrefix + "workspace":              o.workspace,
	}
	if len(debs) > 0 {
		l[LabelPrefix+"base.packages"] = strings.Join(debs, " ")
	}
	for _, pkg := range p.Node.Packages {
		l[LabelPrefix+"node.integrity."+platformKey(pkg.Platform)] = pkg.Integrity
	}
	for _, h := range hs {
		k := LabelPrefix + "harness." + h.Name + "."
		l[k+"package"] = h.Package
		l[k+"version"] = h.Version
		l[k+"integrity"] = h.Integrity
		l[k+"binary"] = h.Binary
		l[k+"proven"] = strconv.FormatBool(h.Proven)
		for _, pkg := range h.Platforms {
			l[k+"platform."+platformKey(pkg.Platform)] = pkg.Name + "@" + pkg.Version + " " + pkg.Integrity
		}
	}
	return l
}

func platformKey(platform string) string { return strings.ReplaceAll(platform, "/", "-") }

// sriHex turns an sha512 SRI string into the hex sha512sum prints.
func sriHex(integrity string) (string, error) {
	b64, ok := strings.CutPrefix(integrity, "sha512-")
	if !ok {
		return "", fmt.Errorf("integrity %q is not sha512", integrity)
	}
	sum, err := base64.StdEncoding.DecodeString(b64)
	if err != nil || len(sum) != 64 {
		return "", fmt.Errorf("integrity %q is not a base64 sha512 digest", integrity)
	}
	return hex.EncodeToString(sum), nil
}

// tarballURL is where the public registry serves name@version.
func tarballURL(name, version string) string {
	return pins.DefaultRegistry + name + "/-/" + name[strings.LastIndex(name, "/")+1:] + "-" + version + ".tgz"
}

// quote renders a Dockerfile double-quoted string.
func quote(s string) string {
	var b bytes.Buffer
	b.WriteByte('"')
	for _, c := range s {
		if c == '"' || c == '\\' || c == '$' {
			b.WriteByte('\\')
		}
		b.WriteRune(c)
	}
	b.WriteByte('"')
	return b.String()
}
