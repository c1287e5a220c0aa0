package daytona

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/tangle-network/boxctl/internal/vendorhttp"
	"github.com/tangle-network/boxctl/vendors"
	"github.com/tangle-network/boxctl/vendors/boxproc"
)

// ProcDir holds the pid of each process Spawn started
// (ProcDir/<id>/pid).
const ProcDir = boxDir + "/proc"

// waitPoll is how often Wait asks whether a process ended.
const waitPoll = 250 * time.Millisecond

// spawnScript is what a spawned process's session command runs, as
// `sh -c spawnScript boxctl-spawn PROCDIR DEADLINE WORKDIR CMD...` (an
// empty DEADLINE or WORKDIR means none). It reads the process's
// environment from its stdin with boxproc.ReadEnv (the toolbox's input
// route writes it there, so it is in no command text, no file and no
// configuration of the sandbox), starts the process with it exported and
// records its pid. With a deadline the process runs in a process group of
// its own, which a watchdog ends at the deadline (TERM, then KILL 10s
// later), and the script answers the process's exit status. Its own
// variables take boxproc's reserved prefix, so no name of the caller's
// overwrites them, and nothing it starts but the process gets the
// environment (the watchdog starts from an empty one).
const spawnScript = `_bxd=$1; _bxdl=$2; _bxwd=$3; shift 3
mkdir -p "$_bxd" || exit 125
_bxleft=
if [ -n "$_bxdl" ]; then
	_bxleft=$((_bxdl - $(date +%s)))
	[ "$_bxleft" -gt 0 ] || { echo "boxctl: the box is past its deadline" >&2; exit 124; }
fi
` + boxproc.ReadEnv + `
[ -z "$_bxwd" ] || cd "$_bxwd" || exit 126
if [ -z "$_bxleft" ]; then echo $$ >"$_bxd/pid"; ` + boxproc.ExportEnv + `; exec "$@" </dev/null; fi
` + boxproc.ExportEnv + `
setsid "$@" </dev/null & _bxc=$!
` + boxproc.UnsetEnv + `
echo "$_bxc" >"$_bxd/pid"
env -i PATH="$PATH" sh -c 'sleep "$1" & s=$!; trap "kill $s 2>/dev/null; exit 0" TERM; wait $s
kill -TERM -- "-$2" 2>/dev/null; sleep 10; kill -KILL -- "-$2" 2>/dev/null' watchdog "$_bxleft" "$_bxc" </dev/null >/dev/null 2>&1 & _bxw=$!
wait "$_bxc"; _bxs=$?
kill "$_bxw" 2>/dev/null
exit "$_bxs"`

// Spawn starts a long-running process as the one asynchronous command of
// a toolbox session named spec.Name; see vendors.Box.Spawn. Its
// environment reaches the process through the command's input only.
func (b *Box) Spawn(ctx context.Context, spec vendors.SpawnSpec) (vendors.Process, error) {
	name, err := boxproc.SpawnName(spec.Command, spec.Name)
	if err != nil {
		return nil, fmt.Errorf("daytona: spawn: %w", err)
	}
	input, err := boxproc.EnvLines(spec.Env)
	if err != nil {
		return nil, fmt.Errorf("daytona: spawn: %w", err)
	}
	deadline := ""
	if !b.deadline.IsZero() {
		deadline = strconv.FormatInt(b.deadline.Unix(), 10)
	}
	cmd := shellJoin(append([]string{"sh", "-c", spawnScript, "boxctl-spawn", ProcDir + "/" + name, deadline, spec.Dir}, spec.Command...))

	err = b.call(ctx, "spawn", vendorhttp.Call{Method: http.MethodPost, Path: "/process/session",
		Body: map[string]string{"sessionId": name}, Want: http.StatusCreated})
	if err != nil {
		if status(err) == http.StatusConflict {
			return nil, fmt.Errorf("daytona: spawn: a process named %s exists in box %s: %w", name, b.id, err)
		}
		return nil, fmt.Errorf("daytona: spawn %s: %w", spec.Command[0], err)
	}
	p := &Process{b: b, id: name}
	fail := func(err error) (vendors.Process, error) {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 15*time.Second)
		defer cancel()
		_ = b.call(cctx, "spawn", vendorhttp.Call{Method: http.MethodDelete, Path: "/process/session/" + url.PathEscape(name)})
		return nil, fmt.Errorf("daytona: spawn %s: %w", spec.Command[0], err)
	}
	var res struct {
		CmdID string `json:"cmdId"`
	}
	if err := b.call(ctx, "spawn", vendorhttp.Call{Method: http.MethodPost, Path: p.session() + "/exec",
		Body: map[string]any{"command": cmd, "runAsync": true, "suppressInputEcho": true}, Out: &res}); err != nil {
		return fail(err)
	}
	if res.CmdID == "" {
		return fail(errors.New("the toolbox answered no command id"))
	}
	p.cmdID = res.CmdID
	if err := p.sendInput(ctx, input); err != nil {
		return fail(err)
	}
	return p, nil
}

// sendInput writes data to the command's standard input. The command's
// input pipe exists once the session's shell runs the command: until then
// the toolbox answers 500 ("failed to open input pipe"), so that is tried
// again for up to 30 seconds (a busy sandbox's shell can take a while).
func (p *Process) sendInput(ctx context.Context, data string) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	for {
		err := p.b.call(ctx, "spawn", vendorhttp.Call{Method: http.MethodPost, Path: p.command() + "/input",
			Body: map[string]string{"data": data}, Want: http.StatusNoContent})
		if err == nil || status(err) != http.StatusInternalServerError {
			return err
		}
		if serr := vendorhttp.Sleep(ctx, 50*time.Millisecond); serr != nil {
			return fmt.Errorf("%w (%w)", serr, err)
		}
	}
}

// Process returns a process Spawn started, by its name (its session).
func (b *Box) Process(ctx context.Context, id string) (vendors.Process, error) {
	if !boxproc.Name.MatchString(id) {
		return nil, fmt.Errorf("daytona: process %q: not a process id", id)
	}
	p := &Process{b: b, id: id}
	var s struct {
		Commands []struct {
			ID string `json:"id"`
		} `json:"commands"`
	}
	if err := b.call(ctx, "process", vendorhttp.Call{Method: http.MethodGet, Path: p.session(), Out: &s}); err != nil {
		return nil, fmt.Errorf("daytona: process %s: %w", id, err)
	}
	if len(s.Commands) == 0 {
		return nil, fmt.Errorf("daytona: process %s: its session ran no command", id)
	}
	p.cmdID = s.Commands[0].ID
	return p, nil
}

// Process is a process Spawn started: the command of a toolbox session.
type Process struct {
	b     *Box
	id    string // the session's id
	cmdID string
}

var _ vendors.Process = (*Process)(nil)

// ID returns the process's name (its session's id).
func (p *Process) ID() string { return p.id }

func (p *Process) session() string { return "/process/session/" + url.PathEscape(p.id) }

func (p *Process) command() string { return p.session() + "/command/" + url.PathEscape(p.cmdID) }

// Logs returns what the process printed so far, stdout and stderr apart.
func (p *Process) Logs(ctx context.Context) ([]byte, []byte, error) {
	resp, err := p.b.request(ctx, "logs", http.MethodGet, p.command()+"/logs", nil, nil, "", http.StatusOK)
	if err != nil {
		return nil, nil, fmt.Errorf("daytona: logs of %s: %w", p.id, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, nil, fmt.Errorf("daytona: logs of %s: %w", p.id, err)
	}
	if strings.HasPrefix(resp.Header.Get("Content-Type"), "application/json") {
		var l struct {
			Stdout string `json:"stdout"`
			Stderr string `json:"stderr"`
		}
		if err := json.Unmarshal(body, &l); err != nil {
			return nil, nil, fmt.Errorf("daytona: logs of %s: %w", p.id, err)
		}
		return []byte(l.Stdout), []byte(l.Stderr), nil
	}
	// An older toolbox answers the raw log, its lines marked by stream.
	var d demux
	stdout, stderr := d.split(body)
	return stdout, stderr, nil
}

// Output follows the process's output from its start until it ends,
// through the toolbox's log stream (a WebSocket).
func (p *Process) Output(ctx context.Context) (io.ReadCloser, io.ReadCloser, error) {
	tb, err := p.b.toolboxClient(ctx)
	if err != nil {
		return nil, nil, err
	}
	u := tb.BaseURL()
	u.Path += p.command() + "/logs"
	u.RawQuery = "follow=true"
	conn, err := dialWebSocket(ctx, p.b.v.opts.httpClient, u.String(), p.b.v.header)
	if err != nil {
		return nil, nil, fmt.Errorf("daytona: output of %s: %w", p.id, p.b.lost(ctx, "output", err))
	}
	outR, outW := io.Pipe()
	errR, errW := io.Pipe()
	stop := context.AfterFunc(ctx, func() { conn.Close() })
	go func() {
		defer stop()
		defer conn.Close()
		var d demux
		var err error
		for {
			var msg []byte
			if msg, err = conn.next(); err != nil {
				break
			}
			out, errb := d.feed(msg)
			if len(out) > 0 {
				if _, err = outW.Write(out); err != nil {
					break
				}
			}
			if len(errb) > 0 {
				if _, err = errW.Write(errb); err != nil {
					break
				}
			}
		}
		out, errb := d.flush()
		_, _ = outW.Write(out)
		_, _ = errW.Write(errb)
		switch {
		case errors.Is(err, io.EOF):
			err = nil
		case ctx.Err() != nil:
			err = context.Cause(ctx)
		default:
			err = p.b.lost(ctx, "output", err)
		}
		outW.CloseWithError(err)
		errW.CloseWithError(err)
	}()
	closeBoth := func() { conn.Close() }
	return &pipeCloser{PipeReader: outR, onClose: closeBoth}, &pipeCloser{PipeReader: errR, onClose: closeBoth}, nil
}

type pipeCloser struct {
	*io.PipeReader
	onClose func()
}

func (c *pipeCloser) Close() error {
	c.onClose()
	return c.PipeReader.Close()
}

// Wait polls the command until it has an exit code.
func (p *Process) Wait(ctx context.Context) (int, error) {
	tick := time.NewTicker(waitPoll)
	defer tick.Stop()
	for {
		var c struct {
			ExitCode *int `json:"exitCode"`
		}
		err := p.b.call(ctx, "wait", vendorhttp.Call{Method: http.MethodGet, Path: p.command(), Out: &c})
		switch {
		case err != nil && ctx.Err() == nil && temporary(err) && !errors.Is(err, vendors.ErrGone):
			// Throttled or failed: ask again at the next tick.
		case err != nil:
			return 0, fmt.Errorf("daytona: wait for %s: %w", p.id, err)
		case c.ExitCode != nil:
			return *c.ExitCode, nil
		}
		select {
		case <-ctx.Done():
			return 0, fmt.Errorf("daytona: wait for %s: %w", p.id, context.Cause(ctx))
		case <-tick.C:
		}
	}
}

// Signal sends sig to the process; one that already ended is not an
// error.
func (p *Process) Signal(ctx context.Context, sig syscall.Signal) error {
	pidFile := ProcDir + "/" + p.id + "/pid"
	res, err := p.b.Exec(ctx, vendors.ExecSpec{Command: []string{"sh", "-c", `i=0; while [ ! -s "$0" ] && [ $i -lt 50 ]; do sleep 0.1; i=$((i+1)); done
p=$(cat "$0") || exit 1
kill -"$1" "$p" 2>/dev/null || ! kill -0 "$p" 2>/dev/null`, pidFile, strconv.Itoa(int(sig))}})
	switch {
	case err != nil:
		return fmt.Errorf("daytona: signal %s: %w", p.id, err)
	case res.ExitCode != 0:
		return fmt.Errorf("daytona: signal %s: exit %d: %s", p.id, res.ExitCode, strings.TrimSpace(string(res.Stderr)))
	}
	return nil
}

// entrypointSession is the toolbox's session of the image's entrypoint,
// which cannot be deleted.
const entrypointSession = "entrypoint"

// endSessions deletes every toolbox session of the box but the
// entrypoint's (each ends what it started), so Spawn's names are free
// again: a resume runs it, since a stopped sandbox may keep its sessions.
func (b *Box) endSessions(ctx context.Context) error {
	var all []struct {
		SessionID string `json:"sessionId"`
	}
	if err := b.call(ctx, "end sessions", vendorhttp.Call{Method: http.MethodGet, Path: "/process/session", Out: &all}); err != nil {
		return err
	}
	for _, s := range all {
		if s.SessionID == entrypointSession {
			continue
		}
		err := b.call(ctx, "end sessions", vendorhttp.Call{Method: http.MethodDelete, Path: "/process/session/" + url.PathEscape(s.SessionID)})
		if err != nil && status(err) != http.StatusNotFound {
			return err
		}
	}
	return nil
}
