package boxproc

import (
	"context"
	"fmt"
	"io"
	"strconv"
	"strings"
	"syscall"
)

// Command is one command a Runner runs in a box.
type Command struct {
	// Op names the operation in errors ("spawn", "read", ...).
	Op string
	// Argv is the argument vector; it is in the vendor's request (and so
	// maybe in an audit log): it never holds a secret.
	Argv []string
	// Stdin is the command's standard input, read to its end and then
	// closed; nil means an empty one. Secrets travel here.
	Stdin io.Reader
	// Stdout and Stderr receive the command's output as it arrives; nil
	// discards it.
	Stdout, Stderr io.Writer
}

// Runner is the one primitive a vendor supplies to the process layer: a
// streaming exec in the box.
type Runner interface {
	// Run runs c in the box, in the box's working directory and
	// environment, copies its output to c.Stdout and c.Stderr as it comes,
	// and returns its exit status (128+n for a signal n) once it ended and
	// its output was copied. A non-zero status is not an error. When ctx
	// ends first, Run kills the command with all it started in its session
	// and returns ctx's cause. A box that vanished under the command is a
	// vendor's *GoneError in the returned error's chain.
	Run(ctx context.Context, c Command) (int, error)
}

// RunnerFunc is a function that is a Runner.
type RunnerFunc func(ctx context.Context, c Command) (int, error)

// Run calls f.
func (f RunnerFunc) Run(ctx context.Context, c Command) (int, error) { return f(ctx, c) }

// SpawnSpec is a long-running process to start: the fields of
// vendors.SpawnSpec, which converts to it.
type SpawnSpec struct {
	Command []string
	Env     map[string]string
	Dir     string
	Name    string
}

// Box is one box as the process layer sees it: Spawn, Process, Read and
// Write, written once over the vendor's Runner. It holds no state of its
// own; the processes' records are in the box (ProcDir), so a Box made
// anew for every call is as good as a kept one.
type Box struct {
	// Vendor is the vendor's name, for errors.
	Vendor string
	// Runner runs commands in the box; required.
	Runner Runner
	// ProcDir is where the box keeps its processes' records. Default:
	// Dir.
	ProcDir string
}

func (b *Box) procDir() string {
	if b.ProcDir == "" {
		return Dir
	}
	return b.ProcDir
}

// run runs argv with no input and returns its stdout; a non-zero exit
// status is an error.
func (b *Box) run(ctx context.Context, op string, argv ...string) ([]byte, error) {
	stdout, stderr := &Capped{Max: 1 << 20}, &Capped{Max: 4096}
	code, err := b.Runner.Run(ctx, Command{Op: op, Argv: argv, Stdout: stdout, Stderr: stderr})
	if err != nil {
		return nil, err
	}
	if code != 0 {
		return stdout.Bytes(), fmt.Errorf("%s exited %d: %s", argv[0], code, strings.TrimSpace(stderr.String()))
	}
	return stdout.Bytes(), nil
}

// Spawn starts a process that outlives the command that started it and
// returns once it runs; see vendors.Box.Spawn. Its environment travels on
// the command's stdin to a supervisor in the box (DetachedSupervisor), so
// it is in no command line and no configuration the vendor keeps of the
// command; only the started process's own environment holds it.
func (b *Box) Spawn(ctx context.Context, spec SpawnSpec) (*Process, error) {
	name, err := SpawnName(spec.Command, spec.Name)
	if err != nil {
		return nil, fmt.Errorf("%s: spawn: %w", b.Vendor, err)
	}
	envIn, err := EnvLines(spec.Env)
	if err != nil {
		return nil, fmt.Errorf("%s: spawn: %w", b.Vendor, err)
	}
	dir := b.procDir() + "/" + name
	argv := append([]string{"/bin/sh", "-c", DetachedSupervisor, "boxctl-spawn", dir, spec.Dir}, spec.Command...)
	stdout, stderr := &Capped{Max: 64}, &Capped{Max: 4096}
	code, err := b.Runner.Run(ctx, Command{Op: "spawn", Argv: argv, Stdin: strings.NewReader(envIn), Stdout: stdout, Stderr: stderr})
	if err != nil {
		return nil, fmt.Errorf("%s: spawn %s: %w", b.Vendor, spec.Command[0], err)
	}
	pid, perr := strconv.Atoi(strings.TrimSpace(stdout.String()))
	if code != 0 || perr != nil || pid <= 0 {
		return nil, fmt.Errorf("%s: spawn %s: supervisor exited %d: %s", b.Vendor, spec.Command[0], code, strings.TrimSpace(stderr.String()))
	}
	return &Process{b: b, id: name, pid: pid}, nil
}

// Process returns a process Spawn started in the box, by its id, from its
// record there; see vendors.Box.Process.
func (b *Box) Process(ctx context.Context, id string) (*Process, error) {
	pid, err := readPID(ctx, b.Vendor, b.Read, b.procDir(), id)
	if err != nil {
		return nil, err
	}
	return &Process{b: b, id: id, pid: pid}, nil
}

// Process is a process Spawn started. It satisfies vendors.Process.
type Process struct {
	b   *Box
	id  string
	pid int
}

// ID returns the process's name in the box.
func (p *Process) ID() string { return p.id }

// PID returns the process's pid in the box.
func (p *Process) PID() int { return p.pid }

func (p *Process) dir() string { return p.b.procDir() + "/" + p.id }

// Output follows the process's stdout and stderr from their start until
// it ends (or ctx ends, or either reader is closed, which ends the
// follower in the box).
func (p *Process) Output(ctx context.Context) (io.ReadCloser, io.ReadCloser, error) {
	fctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	stop := context.AfterFunc(ctx, cancel)
	stdout, stderr, outW, errW := Pipes(cancel)
	go func() {
		defer stop()
		defer cancel()
		_, err := p.b.Runner.Run(fctx, Command{Op: "output", Argv: []string{"/bin/sh", "-c", Follow, p.dir(), strconv.Itoa(p.pid)}, Stdout: outW, Stderr: errW})
		switch {
		case ctx.Err() != nil:
			err = context.Cause(ctx)
		case fctx.Err() != nil:
			err = nil // a reader was closed
		case err != nil:
			err = fmt.Errorf("%s: output of %s: %w", p.b.Vendor, p.id, err)
		}
		outW.CloseWithError(err)
		errW.CloseWithError(err)
	}()
	return stdout, stderr, nil
}

// Logs reads what the process printed so far from its output files.
func (p *Process) Logs(ctx context.Context) ([]byte, []byte, error) {
	return Logs(ctx, p.b.Vendor, p.b.Read, p.dir())
}

// waitScript waits in the box for the exit record of the process whose
// record is $0, at most a minute a call (exit 75: still running).
const waitScript = `[ -d "$0" ] || { echo "no process record $0" >&2; exit 2; }
i=0; while [ ! -e "$0/exit" ]; do [ $i -ge 300 ] && exit 75; sleep 0.2; i=$((i+1)); done
cat "$0/exit"`

// Wait blocks until the process ends, waiting in the box, and returns its
// exit status.
func (p *Process) Wait(ctx context.Context) (int, error) {
	for {
		stdout, stderr := &Capped{Max: 64}, &Capped{Max: 4096}
		code, err := p.b.Runner.Run(ctx, Command{Op: "wait", Argv: []string{"/bin/sh", "-c", waitScript, p.dir()}, Stdout: stdout, Stderr: stderr})
		if err != nil {
			return 0, fmt.Errorf("%s: wait for %s: %w", p.b.Vendor, p.id, err)
		}
		switch code {
		case 0:
			status, err := strconv.Atoi(strings.TrimSpace(stdout.String()))
			if err != nil {
				return 0, fmt.Errorf("%s: wait for %s: exit record %q", p.b.Vendor, p.id, stdout.String())
			}
			return status, nil
		case 75:
			continue
		}
		return 0, fmt.Errorf("%s: wait for %s: exited %d: %s", p.b.Vendor, p.id, code, strings.TrimSpace(stderr.String()))
	}
}

// Signal sends sig to the process; one that already ended is not an
// error.
func (p *Process) Signal(ctx context.Context, sig syscall.Signal) error {
	if _, err := p.b.run(ctx, "signal", Signal(int(sig), p.pid, p.dir())...); err != nil {
		return fmt.Errorf("%s: signal %s: %w", p.b.Vendor, p.id, err)
	}
	return nil
}
