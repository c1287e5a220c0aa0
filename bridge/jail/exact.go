package jail

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// Exact is one shell-free process of an exact process environment, to be
// run by ExactCommand.
type Exact struct {
	// Tmp is the host directory the process sees as /tmp: the
	// environment's own writable file system.
	Tmp string
	// Executable, Args, Cwd and Env are the launch: Env is the process's
	// whole environment (nothing of the bridge's is inherited).
	Executable string
	Args       []string
	Cwd        string
	Env        map[string]string
	// CPUs is how many of the host's CPUs the process may run on (0: all);
	// DataBytes and FileBytes bound its data memory (RLIMIT_DATA) and the
	// size of a file it writes (RLIMIT_FSIZE), 0 meaning no bound.
	CPUs                 int
	DataBytes, FileBytes uint64
}

// ExactCommand returns the command (bwrap and its arguments) that runs x
// confined: fresh user, pid, network (loopback only), ipc, uts and cgroup
// namespaces (--unshare-all), every capability dropped, a new session, an
// environment cleared to x.Env, the host's system paths read-only, x.Tmp
// as a private /tmp and nothing else of the host, the bridge's data
// directory hidden. Inside, the bridge's own executable (called with
// LimitArg) applies the limits and becomes x's executable. The process
// dies with the bridge.
func (j *Jailer) ExactCommand(x Exact) (string, []string, error) {
	bwrap, err := j.bwrap()
	if err != nil {
		return "", nil, err
	}
	limiter := j.opts.Relay
	if limiter == "" {
		return "", nil, errors.New("exact process: the bridge does not know its own executable to launch with")
	}
	a := []string{"--unshare-all", "--die-with-parent", "--new-session", "--clearenv", "--cap-drop", "ALL"}
	if os.Getuid() == 0 {
		a = append(a, "--uid", "65534", "--gid", "65534") // see namespaceArgs
	}
	for _, sp := range systemPaths {
		a = appendSystemPath(a, sp)
	}
	a = append(a, "--dev", "/dev", "--proc", "/proc", "--bind", x.Tmp, "/tmp")
	// The launcher is shown at a path of its own: bound where it is on the
	// host (under /tmp, say) it would make its mount point in the
	// environment's files.
	a = append(a, "--ro-bind", limiter, exactLauncher)
	if data := j.opts.DataDir; data != "" && visibleSystem(data) {
		a = append(a, "--tmpfs", data, "--remount-ro", data)
	}
	keys := make([]string, 0, len(x.Env))
	for k := range x.Env {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		a = append(a, "--setenv", k, x.Env[k])
	}
	// bwrap sets PWD to the directory it changes to: the launcher puts
	// back the launch's own PWD, or none.
	pwd := "-"
	if v, ok := x.Env["PWD"]; ok {
		pwd = "=" + v
	}
	a = append(a, "--chdir", x.Cwd, "--", exactLauncher, LimitArg, strconv.Itoa(x.CPUs),
		strconv.FormatUint(x.DataBytes, 10), strconv.FormatUint(x.FileBytes, 10), pwd, x.Executable)
	return bwrap, append(a, x.Args...), nil
}

// visibleSystem reports whether a host path shows under the system paths
// an exact process sees.
func visibleSystem(path string) bool {
	real := canonical(path)
	for _, sp := range systemPaths {
		if within(canonical(sp), real) {
			return true
		}
	}
	return false
}

// exactLauncher is where an exact process's jail shows the bridge's
// executable: on the jail's own root, outside every path of the host.
const exactLauncher = "/.box-bridge/launcher"

// LimitArg is the first argument that makes the bridge's executable the
// launcher of an exact process inside its jail:
// `<exe> LimitArg CPUS DATA FSIZE PWD EXECUTABLE ARGS...`, where PWD is
// "=value" for the launch's own PWD and "-" for none.
const LimitArg = "__box-bridge-exact-limit"

// ServeLimitIfAsked applies an exact process's limits and executes it
// when this process was started as its launcher (os.Args[1] is LimitArg);
// otherwise it returns at once. ServeRelayIfAsked calls it. The launch
// never returns: it becomes the process, or exits 127
// (not found or not executable) or 125 (the limits could not be set).
func ServeLimitIfAsked() {
	if len(os.Args) > 1 && os.Args[1] == LimitArg {
		os.Exit(runLimited(os.Args[2:]))
	}
}

func runLimited(args []string) int {
	if len(args) < 5 {
		fmt.Fprintln(os.Stderr, "box-bridge exact launcher: want CPUS DATA FSIZE PWD EXECUTABLE [ARGS...]")
		return 125
	}
	if v, ok := strings.CutPrefix(args[3], "="); ok {
		os.Setenv("PWD", v)
	} else {
		os.Unsetenv("PWD")
	}
	args = append(args[:3:3], args[4:]...)
	cpus, err1 := strconv.Atoi(args[0])
	data, err2 := strconv.ParseUint(args[1], 10, 64)
	fsize, err3 := strconv.ParseUint(args[2], 10, 64)
	if err := errors.Join(err1, err2, err3); err != nil {
		fmt.Fprintln(os.Stderr, "box-bridge exact launcher:", err)
		return 125
	}
	// Affinity is a thread's: the one that executes carries it into the
	// new program.
	runtime.LockOSThread()
	if err := applyLimits(cpus, data, fsize); err != nil {
		fmt.Fprintln(os.Stderr, "box-bridge exact launcher:", err)
		return 125
	}
	bin, err := exec.LookPath(args[3]) // on the launch's own PATH
	if err != nil {
		fmt.Fprintln(os.Stderr, "box-bridge exact launcher:", err)
		return 127
	}
	err = syscall.Exec(bin, args[3:], os.Environ())
	fmt.Fprintln(os.Stderr, "box-bridge exact launcher:", err)
	return 127
}

func applyLimits(cpus int, data, fsize uint64) error {
	for _, l := range []struct {
		res int
		max uint64
	}{{unix.RLIMIT_DATA, data}, {unix.RLIMIT_FSIZE, fsize}} {
		if l.max == 0 {
			continue
		}
		if err := unix.Setrlimit(l.res, &unix.Rlimit{Cur: l.max, Max: l.max}); err != nil {
			return fmt.Errorf("setrlimit: %w", err)
		}
	}
	if cpus <= 0 {
		return nil
	}
	return limitCPUs(cpus)
}
