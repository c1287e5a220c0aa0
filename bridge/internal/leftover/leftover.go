// Package leftover ends the processes a previous incarnation of the bridge
// left running. Every process the bridge starts carries a marker, an
// environment entry KEY=VALUE that its children inherit, and is recorded
// with its process group; a leftover is recognised by its marker before it
// is signalled, so that a recycled pid or process group id of an unrelated
// process is never signalled.
//
// Kill scans every process, not only a group's leader: a group whose
// leader exited still holds marked processes, and they are found.
package leftover

import (
	"bytes"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
)

// Group is one leftover to end: the marker its processes carry and the
// process group they were started in (0: none recorded).
type Group struct {
	Marker string
	PGID   int
}

// Kill sends SIGKILL to every process under procDir (the proc filesystem,
// usually /proc) whose environment holds a group's marker, and to each
// group's process group when a marked process is still in it, so that its
// unmarked members (a process whose environment is its own) end too. It
// reads procDir once for all the groups, and not at all when no group has
// a marker, and returns how many marked processes it found of each. A
// group with no marker is left alone.
func Kill(procDir string, groups []Group) []int {
	found := make([]int, len(groups))
	groupMarked := make([]bool, len(groups))
	if !slices.ContainsFunc(groups, func(g Group) bool { return g.Marker != "" }) {
		return found // nothing to look for: /proc is not read
	}
	d, err := os.Open(procDir)
	if err != nil {
		return found
	}
	names, _ := d.Readdirnames(-1)
	d.Close()
	var env []byte
	for _, name := range names {
		pid, err := strconv.Atoi(name)
		if err != nil || pid == os.Getpid() {
			continue
		}
		if env, err = readProcFile(filepath.Join(procDir, name, "environ"), env[:0]); err != nil {
			continue
		}
		for i, g := range groups {
			if g.Marker == "" || !hasEntry(env, g.Marker) {
				continue
			}
			found[i]++
			if g.PGID > 0 && processGroup(procDir, pid) == g.PGID {
				groupMarked[i] = true
			}
			syscall.Kill(pid, syscall.SIGKILL)
		}
	}
	for i, g := range groups {
		if groupMarked[i] {
			syscall.Kill(-g.PGID, syscall.SIGKILL)
		}
	}
	return found
}

// readProcFile reads a /proc file (whose size stat does not tell) into
// buf, which it grows as needed.
func readProcFile(path string, buf []byte) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return buf, err
	}
	defer f.Close()
	for {
		if len(buf) == cap(buf) {
			buf = append(buf, 0)[:len(buf)]
		}
		n, err := f.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		if err == io.EOF {
			return buf, nil
		}
		if err != nil {
			return buf, err
		}
	}
}

// hasEntry reports whether the NUL-separated environment environ holds
// the entry KEY=VALUE.
func hasEntry(environ []byte, entry string) bool {
	for len(environ) > 0 {
		kv := environ
		if i := bytes.IndexByte(environ, 0); i >= 0 {
			kv, environ = environ[:i], environ[i+1:]
		} else {
			environ = nil
		}
		if string(kv) == entry {
			return true
		}
	}
	return false
}

// processGroup reads a process's group id from /proc/<pid>/stat, or -1.
func processGroup(procDir string, pid int) int {
	b, err := os.ReadFile(filepath.Join(procDir, strconv.Itoa(pid), "stat"))
	if err != nil {
		return -1
	}
	// The command name is in parentheses and may hold spaces.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return -1
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 3 {
		return -1
	}
	g, err := strconv.Atoi(f[2])
	if err != nil {
		return -1
	}
	return g
}
