// Package boxproc is the process layer of the vendors: how a box runs the
// processes Box.Spawn starts, and reads and writes its files, written once
// over one primitive a vendor supplies, a Runner (a streaming exec with
// stdin: run this argument vector with this input, stream its stdout and
// stderr, answer its exit status, and kill its session when the context
// ends).
//
// Box holds Spawn, Process, Read and Write, and Process holds Output,
// Logs, Wait and Signal, all of them commands run through the Runner:
// a supervisor in the box (DetachedSupervisor) takes the environment on
// its stdin, so that no secret is in a command line or an exec's
// configuration, and keeps each process's record under Dir
// (Dir/<id>/{pid,stdout,stderr,exit}); Output follows the record's files
// (Follow), Wait waits in the box for the exit record, Read and Write move
// tar streams, read and unpacked by the box user. The Docker, Kubernetes
// and E2B vendors run the layer over their exec APIs (E2B: envd's process
// service, its Read and Write on envd's own files API). A vendor written
// outside this module does the same: vendors.NewProcs takes its Runner
// (a RunnerFunc), and its Box embeds what NewProcs returns.
//
// Daytona's toolbox has no such exec: its one-shot /process/execute takes
// no stdin and answers one combined output at the end, so the Daytona
// vendor runs processes through the toolbox's session API instead (a
// session's command takes input and streams its log), which is that
// vendor's own Spawn.
//
// The package also holds the scripts and small helpers the vendors share
// about their processes: the names a process and an environment variable
// may have, the environment's encoding on stdin, and the buffers and
// pipes around output.
package boxproc

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"maps"
	"path"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Dir is where a box keeps the pid, output and exit status of each process
// started with Spawn (Dir/<id>/{pid,stdout,stderr,exit}).
const Dir = "/tmp/.boxctl/proc"

// ExecDir holds the pid files of running Exec commands, so a cancelled
// Exec can stop its command.
const ExecDir = "/tmp/.boxctl/exec"

var (
	// Name is what a process id (SpawnSpec.Name) may be.
	Name = regexp.MustCompile(`^[a-zA-Z0-9][a-zA-Z0-9_-]{0,63}$`)
	// EnvName is what an environment variable's name may be.
	EnvName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)
)

// CheckEnv refuses an environment with a name that is not EnvName, or
// that takes the prefix the scripts keep for their own variables (_bx).
func CheckEnv(env map[string]string) error {
	for k := range env {
		if !EnvName.MatchString(k) || strings.HasPrefix(k, "_bx") {
			return fmt.Errorf("environment variable name %q (letters, digits and '_', not starting with a digit or _bx)", k)
		}
	}
	return nil
}

// EnvLines encodes env for ReadEnv: one line NAME=base64(value) per
// variable, sorted by name, then an empty line. It refuses a name that is
// not EnvName.
func EnvLines(env map[string]string) (string, error) {
	var b strings.Builder
	if err := CheckEnv(env); err != nil {
		return "", err
	}
	for _, k := range slices.Sorted(maps.Keys(env)) {
		b.WriteString(k + "=" + base64.StdEncoding.EncodeToString([]byte(env[k])) + "\n")
	}
	b.WriteString("\n")
	return b.String(), nil
}

// The scripts below keep their own shell variables under the prefix _bx,
// which no environment variable may take (EnvLines refuses it), so a
// variable of the caller's never overwrites one of theirs.

// ReadEnv is the shell snippet that reads EnvLines from standard input,
// stopping at the empty line, into shell variables that are not exported
// yet (so the values are in no command line and no process's initial
// environment, not even the decoder's that runs next); ExportEnv exports
// them just before the command starts and UnsetEnv drops them right after,
// so that the command is the only process whose environment holds them.
// A cut-short input or a bad line exits 125. The shell reads a pipe a byte
// at a time, so whatever follows the empty line stays for the command.
const ReadEnv = `_bxn=0
while :; do
	IFS= read -r _bxkv || { echo "environment cut short" >&2; exit 125; }
	[ -n "$_bxkv" ] || break
	case ${_bxkv%%=*} in "" | _bx* | [!A-Za-z_]* | *[!A-Za-z0-9_]*) echo "bad environment name" >&2; exit 125 ;; esac
	_bxn=$((_bxn + 1))
	eval "_bxk_$_bxn=\${_bxkv%%=*}"
	eval "_bxv_$_bxn=\$(printf %s \"\${_bxkv#*=}\" | base64 -d && printf x)" || { echo "bad environment line" >&2; exit 125; }
done`

// ExportEnv exports what ReadEnv read (values kept byte for byte).
const ExportEnv = `_bxi=1
while [ "$_bxi" -le "$_bxn" ]; do eval "export \"\$_bxk_$_bxi=\${_bxv_$_bxi%x}\""; _bxi=$((_bxi + 1)); done`

// UnsetEnv drops what ReadEnv read from the shell.
const UnsetEnv = `_bxi=1
while [ "$_bxi" -le "$_bxn" ]; do eval "unset \"\$_bxk_$_bxi\" _bxv_$_bxi"; _bxi=$((_bxi + 1)); done`

// ExecEnvWrapper is ExecWrapper for exec APIs that take no environment
// (the Kubernetes exec subresource): $0 is the pid file, $1 the working
// directory (empty for the box's); it reads the environment with ReadEnv
// from its standard input, whose rest goes to the command.
const ExecEnvWrapper = `_bxf=$0; _bxw=$1; shift
` + ReadEnv + `
[ -z "$_bxw" ] || cd "$_bxw" || exit 126
mkdir -p "${_bxf%/*}" || exit 126
` + ExportEnv + `
setsid -w sh -c 'echo $$ >"$0" && exec "$@"' "$_bxf" "$@"
_bxs=$?; rm -f "$_bxf"; exit $_bxs`

// DetachedSupervisor starts a spawned process that outlives the exec that
// started it, for exec APIs whose streams end with their command: $1 is
// the process's record directory under Dir, $2 the working directory
// (empty for the box's). It starts a supervisor in a session of its own,
// with no tie to the exec's output, which reads the environment from the
// exec's stdin (ReadEnv), lets go of that stdin, runs "$@" with it and its
// output in files (made before it starts, so that Logs finds them as soon
// as the pid is known), records its pid and, when it ends, its exit status
// (128+n for a signal n). The script prints the pid once the process
// runs, or why it did not start, then exits.
const DetachedSupervisor = `_bxd=$1; _bxw=$2; shift 2
mkdir -p "${_bxd%/*}" && mkdir "$_bxd" || { echo "process $_bxd exists" >&2; exit 125; }
[ -z "$_bxw" ] || cd "$_bxw" || { echo "no directory $_bxw" >&2; exit 126; }
mkfifo "$_bxd/started" || exit 125
# A background command's stdin is /dev/null unless redirected: hand it
# the exec's through fd 3. Until the process runs, the supervisor's
# errors go to a file the fifo then carries.
exec 3<&0
setsid sh -c '_bxd=$0
trap '"'"'[ -s "$_bxd/error" ] || echo "the supervisor did not start" >"$_bxd/error"; cat "$_bxd/error" >"$_bxd/started"'"'"' EXIT
exec 2>"$_bxd/error"
` + ReadEnv + `
exec </dev/null 2>/dev/null
trap - EXIT
` + ExportEnv + `
: >"$_bxd/stdout"; : >"$_bxd/stderr"
"$@" >>"$_bxd/stdout" 2>>"$_bxd/stderr" & _bxp=$!
` + UnsetEnv + `
echo "$_bxp" >"$_bxd/pid"; echo "$_bxp" >"$_bxd/started"
wait "$_bxp"; _bxs=$?
echo "$_bxs" >"$_bxd/exit.tmp" && mv "$_bxd/exit.tmp" "$_bxd/exit"' "$_bxd" "$@" <&3 3<&- >/dev/null 2>&1 &
exec 3<&-
_bxp=$(cat "$_bxd/started"); rm -f "$_bxd/started" "$_bxd/error"
case $_bxp in *[!0-9]* | "") echo "${_bxp:-the supervisor did not start}" >&2; exit 125 ;; esac
echo "$_bxp"`

// Follow is the script that follows a spawned process's output: $0 is its
// record directory, $1 its pid. It prints the process's stdout and stderr
// from their start on its own stdout and stderr until the process ends.
// It is stopped by ending its command (Runner.Run kills its session).
const Follow = `tail -c +1 -s 0.2 --pid="$1" -F "$0/stdout" 2>/dev/null & o=$!
tail -c +1 -s 0.2 --pid="$1" -F "$0/stderr" >&2 2>/dev/null & e=$!
wait $o $e`

// ExecWrapper runs "$@" in a session of its own whose id it records in the
// pid file $0, so that a cancelled Exec can kill the command with all its
// children (KillSession); the file goes when the command ends.
const ExecWrapper = `mkdir -p "${0%/*}" || exit 126
setsid -w sh -c 'echo $$ >"$0" && exec "$@"' "$0" "$@"
s=$?; rm -f "$0"; exit $s`

// KillSession is the command that kills the session whose id pidFile
// holds, waiting a moment for the file if the command has not written it
// yet.
func KillSession(pidFile string) []string {
	return []string{"sh", "-c", `i=0; while [ ! -s "$0" ] && [ $i -lt 20 ]; do sleep 0.1; i=$((i+1)); done
p=$(cat "$0" 2>/dev/null) && kill -9 "-$p" 2>/dev/null; rm -f "$0"`, pidFile}
}

// Signal is the command that sends signal number sig to the spawned
// process pid whose record is in dir; one that already ended is not an
// error (the command exits 0).
func Signal(sig, pid int, dir string) []string {
	return []string{"sh", "-c", `[ -e "$2/exit" ] || kill -"$0" "$1" 2>/dev/null || ! kill -0 "$1" 2>/dev/null`,
		fmt.Sprint(sig), fmt.Sprint(pid), dir}
}

// Logs reads what the spawned process whose record is dir printed so far,
// from its stdout and stderr files, with read (the vendor's Box.Read);
// errors name the vendor and the process.
func Logs(ctx context.Context, vendor string, read func(context.Context, string) ([]byte, error), dir string) (stdout, stderr []byte, err error) {
	if stdout, err = read(ctx, dir+"/stdout"); err == nil {
		stderr, err = read(ctx, dir+"/stderr")
	}
	if err != nil {
		return nil, nil, fmt.Errorf("%s: logs of %s: %w", vendor, path.Base(dir), err)
	}
	return stdout, stderr, nil
}

// readPID reads the pid of the spawned process id from its record under
// dir with read (the box's file read); errors name the vendor and the
// process.
func readPID(ctx context.Context, vendor string, read func(context.Context, string) ([]byte, error), dir, id string) (int, error) {
	if !Name.MatchString(id) {
		return 0, fmt.Errorf("%s: process %q: not a process id", vendor, id)
	}
	raw, err := read(ctx, dir+"/"+id+"/pid")
	if err != nil {
		return 0, fmt.Errorf("%s: process %s: %w", vendor, id, err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(raw)))
	if err != nil || pid <= 0 {
		return 0, fmt.Errorf("%s: process %s: pid file holds %q", vendor, id, raw)
	}
	return pid, nil
}

// TarFile is a tar stream of one regular file, name, with data and mode:
// how content goes into a box through an archive or exec API.
func TarFile(name string, data []byte, mode uint32) ([]byte, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	h := &tar.Header{Name: name, Mode: int64(mode & 0o7777), Size: int64(len(data)), ModTime: time.Now(), Typeflag: tar.TypeReg, Format: tar.FormatPAX}
	if err := tw.WriteHeader(h); err != nil {
		return nil, err
	}
	if _, err := tw.Write(data); err != nil {
		return nil, err
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// UntarFile returns the content of the first entry of the tar stream r,
// which must be a regular file of at most max bytes.
func UntarFile(r io.Reader, max int64) ([]byte, error) {
	tr := tar.NewReader(r)
	h, err := tr.Next()
	if err != nil {
		return nil, err
	}
	if h.Typeflag != tar.TypeReg {
		return nil, errors.New("not a regular file")
	}
	if h.Size > max {
		return nil, fmt.Errorf("%d bytes is over the %d byte limit", h.Size, max)
	}
	return io.ReadAll(io.LimitReader(tr, h.Size))
}

// WritePath refuses a path Box.Write cannot take: it wants a clean
// absolute path of a file.
func WritePath(p string) error {
	if !path.IsAbs(p) || path.Clean(p) != p || p == "/" {
		return fmt.Errorf("write %q: want a clean absolute file path", p)
	}
	return nil
}

// SpawnName checks a spawn's command and returns its process id: name, or
// a random one when name is empty.
func SpawnName(command []string, name string) (string, error) {
	if len(command) == 0 {
		return "", errors.New("empty command")
	}
	if name == "" {
		return RandomID(), nil
	}
	if !Name.MatchString(name) {
		return "", fmt.Errorf("process name %q: want letters, digits, '-', '_'", name)
	}
	return name, nil
}

// RandomID returns a random process or file name.
func RandomID() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// Capped keeps the first Max bytes written to it and discards the rest.
// It is a plain io.Writer (no ReadFrom or WriteString), so no copy can go
// around the cap.
type Capped struct {
	Max int64
	buf bytes.Buffer
}

// Write keeps what fits and reports all of p written.
func (c *Capped) Write(p []byte) (int, error) {
	if room := c.Max - int64(c.buf.Len()); room > 0 {
		c.buf.Write(p[:min(int64(len(p)), room)])
	}
	return len(p), nil
}

// Bytes returns what was kept.
func (c *Capped) Bytes() []byte { return c.buf.Bytes() }

// String returns what was kept.
func (c *Capped) String() string { return c.buf.String() }

// Len returns how many bytes were kept.
func (c *Capped) Len() int { return c.buf.Len() }

// Pipes returns the readers of a process's stdout and stderr and the
// writers that feed them; closing either reader calls onClose (which stops
// the feeding) and closes that reader.
func Pipes(onClose func()) (stdout, stderr io.ReadCloser, outW, errW *io.PipeWriter) {
	outR, outW := io.Pipe()
	errR, errW := io.Pipe()
	return &pipeCloser{PipeReader: outR, onClose: onClose}, &pipeCloser{PipeReader: errR, onClose: onClose}, outW, errW
}

type pipeCloser struct {
	*io.PipeReader
	onClose func()
}

func (c *pipeCloser) Close() error {
	c.onClose()
	return c.PipeReader.Close()
}

// EndEarlierScript is a shell script that ends every process a box's
// earlier run left (its Spawn records and running Execs) and removes their
// records, so Spawn's names are free again: run at the resume of a box
// whose vendor kept its processes across a suspend. The record of the
// Exec that runs it (a directory whose pid is the script's parent, as
// Daytona's Exec keeps its output there) is kept.
const EndEarlierScript = `for f in ` + Dir + `/*/pid; do [ -f "$f" ] && kill -9 -- "-$(cat "$f")" "$(cat "$f")" 2>/dev/null; done; rm -rf ` + Dir +
	`; for e in ` + ExecDir + `/*; do [ "$(cat "$e/pid" 2>/dev/null)" = "$PPID" ] || rm -rf "$e"; done; true`
