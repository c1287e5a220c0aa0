package jail

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/tangle-network/boxctl/bridge/harness"
	"github.com/tangle-network/boxctl/bridge/wire"
)

// systemPaths are what an fs-jail shows of the host, read-only: binaries,
// libraries, configuration (TLS roots, passwd, resolv.conf) and /opt. A
// symbolic link among them (merged /usr) is recreated as the same link.
var systemPaths = []string{"/usr", "/bin", "/sbin", "/lib", "/lib64", "/lib32", "/libx32", "/etc", "/opt"}

// netMasked are the host directories a net jail hides behind empty tmpfs
// mounts when the rest of the host is visible: where Unix sockets of host
// daemons live.
var netMasked = []string{"/tmp", "/run"}

// Prepared is the confinement of one turn (or one long-lived session
// process), ready to wrap its command.
type Prepared struct {
	j       *Jailer
	req     Request
	project string // the project directory, as the harness names it
	root    string // the jail root (fs jails only)
	state   string // the session's state directory
	// Env is the environment the jail gives the harness (HOME, XDG
	// directories and TMPDIR in its root), to apply under the adapter's
	// own settings.
	Env map[string]string
	// RouterURL is the model endpoint URL the harness must be given.
	RouterURL string
}

// Prepare resolves r (raised to the floor) for a turn in cwd ("" for the
// bridge's working directory) whose harness keeps its state in stateDir,
// and creates the jail root. Errors are those of Check, but for the
// probe.
func (j *Jailer) Prepare(r Request, cwd, stateDir string) (*Prepared, error) {
	r = j.Resolve(r)
	project, root, err := j.paths(r, cwd)
	if err != nil {
		return nil, err
	}
	p := &Prepared{j: j, req: r, project: project, root: root, state: stateDir, RouterURL: j.opts.RouterURL}
	if r.fs() {
		if err := makeRoot(project, root); err != nil {
			return nil, err
		}
		p.Env = map[string]string{
			"HOME":            root,
			"TMPDIR":          filepath.Join(root, ".tmp"),
			"XDG_CONFIG_HOME": filepath.Join(root, ".config"),
			"XDG_CACHE_HOME":  filepath.Join(root, ".cache"),
			"XDG_DATA_HOME":   filepath.Join(root, ".local", "share"),
			"XDG_STATE_HOME":  filepath.Join(root, ".local", "state"),
			"XDG_RUNTIME_DIR": filepath.Join(root, ".runtime"),
		}
	}
	if r.Net {
		if err := j.checkNet(r); err != nil {
			return nil, err
		}
		p.RouterURL = j.ep.url
	}
	return p, nil
}

// Key names what a process started under p is confined by: a session's
// long-lived process serves only turns of the same key.
func (p *Prepared) Key() string {
	if p == nil {
		return ""
	}
	return fmt.Sprintf("jail=%s root=%q net=%t", p.req.Mode, p.root, p.req.Net)
}

// paths resolves the project directory and, for a file-system jail, the
// jail root.
func (j *Jailer) paths(r Request, cwd string) (project, root string, err error) {
	if cwd == "" {
		if cwd, err = os.Getwd(); err != nil {
			return "", "", &RequestError{Msg: "a jailed turn needs a project directory: give cwd"}
		}
	}
	project = filepath.Clean(cwd)
	real, err := filepath.EvalSymlinks(project)
	if err != nil {
		return "", "", &RequestError{Msg: fmt.Sprintf("cwd %s cannot be resolved: %v", project, err)}
	}
	if !r.fs() {
		return project, "", nil
	}
	if real == "/" {
		return "", "", &RequestError{Msg: "a jailed turn's project directory cannot be / : give cwd, the directory it may write"}
	}
	if j.opts.DataDir != "" && within(canonical(j.opts.DataDir), real) {
		return "", "", &RequestError{Msg: "a jailed turn's cwd cannot be inside the bridge's data directory"}
	}
	root = r.Root
	if root == "" {
		root = DefaultRoot
	}
	if !filepath.IsAbs(root) {
		root = filepath.Join(project, root)
	}
	root = filepath.Clean(root)
	if c := canonical(root); c == real || !within(real, c) {
		return "", "", &RequestError{Msg: fmt.Sprintf("jail.root %q must be a subdirectory of the project directory %s", r.Root, project)}
	}
	return project, root, nil
}

// makeRoot creates the jail root and the directories its environment
// names, with a .gitignore that ignores them all, and checks again that no
// link took it out of the project directory.
func makeRoot(project, root string) error {
	for _, d := range []string{".tmp", ".config", ".cache", ".local/share", ".local/state", ".runtime"} {
		if err := os.MkdirAll(filepath.Join(root, d), 0o700); err != nil {
			return fmt.Errorf("jail root: %w", err)
		}
	}
	real, err := filepath.EvalSymlinks(root)
	if err != nil {
		return fmt.Errorf("jail root: %w", err)
	}
	if p, _ := filepath.EvalSymlinks(project); !within(p, real) || p == real {
		return &RequestError{Msg: fmt.Sprintf("jail root %s resolves outside the project directory", root)}
	}
	ignore := filepath.Join(root, ".gitignore")
	if _, err := os.Lstat(ignore); os.IsNotExist(err) {
		if err := os.WriteFile(ignore, []byte("*\n"), 0o600); err != nil {
			return fmt.Errorf("jail root: %w", err)
		}
	}
	return nil
}

// Wrap returns cmd confined by p: bwrap, running cmd (through the relay in
// a net jail). cleanup releases what the jail holds outside the process
// (the net jail's forwarder); call it once the process has exited.
func (p *Prepared) Wrap(cmd harness.Command) (_ harness.Command, cleanup func(), err error) {
	bwrap, err := p.j.bwrap()
	if err != nil {
		return cmd, nil, err
	}
	bin, err := exec.LookPath(cmd.Path)
	if err != nil {
		return cmd, nil, err
	}
	if bin, err = filepath.Abs(bin); err != nil {
		return cmd, nil, err
	}
	var fw *forwarder
	cleanup = func() {}
	if p.req.Net {
		if fw, err = startForwarder(p.j.ep, p.j.log); err != nil {
			return cmd, nil, err
		}
		cleanup = fw.close
	}
	bins := []string{bin}
	for _, r := range cmd.Runs {
		rb, err := exec.LookPath(r)
		if err != nil {
			return cmd, nil, err
		}
		if rb, err = filepath.Abs(rb); err != nil {
			return cmd, nil, err
		}
		bins = append(bins, rb)
	}
	out := cmd
	out.Path = bwrap
	out.Args = p.args(bins, cmd, fw)
	return out, cleanup, nil
}

// args are bwrap's arguments; mounts apply in order, the last one over a
// path wins.
func (p *Prepared) args(bins []string, cmd harness.Command, fw *forwarder) []string {
	bin := bins[0]
	mode, net := p.req.Mode, p.req.Net
	a := namespaceArgs(net)
	switch mode {
	case wire.JailFS:
		paths := systemPaths
		if !net {
			paths = append(paths[:len(paths):len(paths)], "/run/systemd/resolve")
		}
		for _, sp := range paths {
			a = appendSystemPath(a, sp)
		}
		a = append(a, "--dev", "/dev", "--proc", "/proc", "--tmpfs", "/tmp")
	case wire.JailWrite:
		a = append(a, "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc")
	default:
		a = append(a, "--bind", "/", "/", "--dev", "/dev", "--proc", "/proc")
	}
	if net && mode != wire.JailFS {
		for _, m := range netMasked {
			a = append(a, "--tmpfs", m)
		}
	}
	// What the harness needs that the view above hides: its binary, the
	// relay, its project and state directories.
	for _, b := range bins {
		for _, d := range p.binDirs(b) {
			if !p.visible(d) {
				a = append(a, "--ro-bind", d, d)
			}
		}
	}
	relay := p.j.opts.Relay
	if net && !p.visible(relay) {
		a = append(a, "--ro-bind", relay, relay)
	}
	fs := p.req.fs()
	if fs || !p.visible(p.project) {
		a = append(a, "--bind", p.project, p.project)
	}
	data := p.j.opts.DataDir
	if fs && data != "" {
		a = append(a, "--tmpfs", data)
	}
	if p.state != "" && (fs || !p.visible(p.state)) {
		a = append(a, "--bind", p.state, p.state)
	}
	if fs && data != "" {
		a = append(a, "--remount-ro", data)
	}
	if net {
		a = append(a, "--bind", fw.sock, fw.sock, "--ro-bind", fw.hosts, "/etc/hosts")
	}
	dir := cmd.Dir
	if dir == "" {
		dir = p.project
	}
	a = append(a, "--chdir", dir, "--")
	if net {
		a = append(a, relay, RelayArg, p.j.ep.listen, fw.sock)
	}
	return append(append(a, bin), cmd.Args...)
}

// appendSystemPath shows the host's sp read-only: a directory bound, a
// link recreated, a missing path skipped.
func appendSystemPath(a []string, sp string) []string {
	fi, err := os.Lstat(sp)
	switch {
	case err != nil:
		return a
	case fi.Mode()&os.ModeSymlink != 0:
		if target, err := os.Readlink(sp); err == nil {
			return append(a, "--symlink", target, sp)
		}
		return a
	case fi.IsDir():
		return append(a, "--ro-bind", sp, sp)
	}
	return a
}

// visible reports whether the host path shows in the jail's base view,
// before the binds that expose what the harness needs.
func (p *Prepared) visible(path string) bool {
	real := canonical(path)
	switch {
	case p.req.Mode == wire.JailFS:
		for _, sp := range systemPaths {
			if within(canonical(sp), real) {
				return true
			}
		}
		return false
	case p.req.Net:
		for _, m := range netMasked {
			if within(canonical(m), real) {
				return false
			}
		}
	}
	return true
}

// binDirs are the directories of the harness binary to show read-only:
// the one it is found in and its real install root (the parent of a bin
// directory). None is /, the project directory or an ancestor of it, or in
// or above the data directory: showing those would undo the jail.
func (p *Prepared) binDirs(bin string) []string {
	cands := []string{filepath.Dir(bin)}
	if real, err := filepath.EvalSymlinks(bin); err == nil {
		d := filepath.Dir(real)
		if filepath.Base(d) == "bin" {
			d = filepath.Dir(d)
		}
		cands = append(cands, d)
	}
	project := canonical(p.project)
	data := ""
	if p.j.opts.DataDir != "" {
		data = canonical(p.j.opts.DataDir)
	}
	home, _ := os.UserHomeDir()
	var out []string
	for _, c := range cands {
		c = canonical(c)
		switch {
		case c == "/" || c == "/home" || (home != "" && c == canonical(home)),
			within(c, project),
			data != "" && (within(c, data) || within(data, c)):
			continue
		}
		if len(out) == 0 || out[len(out)-1] != c {
			out = append(out, c)
		}
	}
	return out
}

// canonical is path, absolute, with the links of its longest existing
// prefix resolved.
func canonical(path string) string {
	path, _ = filepath.Abs(path)
	var tail []string
	for cur := path; ; cur = filepath.Dir(cur) {
		if real, err := filepath.EvalSymlinks(cur); err == nil {
			return filepath.Join(append([]string{real}, tail...)...)
		}
		if filepath.Dir(cur) == cur {
			return path
		}
		tail = append([]string{filepath.Base(cur)}, tail...)
	}
}

// within reports whether path is base or inside it (both clean and
// absolute).
func within(base, path string) bool {
	if base == path || base == "/" {
		return true
	}
	return strings.HasPrefix(path, base+string(filepath.Separator))
}
