package reaper

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"strconv"
	"strings"
)

// Owners. A box's owner label says who may still want it:
//
//	pid:<host>:<pid>:<start>   a process on host, identified by its pid and
//	                           start time (so a reused pid is not it)
//	user:<name>                a user's state (boxctl up); gone only when
//	                           the user's state no longer names the box
//
// gc treats a pid owner on this host as gone when no such process runs.
const (
	ownerPID  = "pid"
	ownerUser = "user"
)

// ProcessOwner returns the owner label of the calling process.
func ProcessOwner() string {
	host, _ := os.Hostname()
	pid := os.Getpid()
	return fmt.Sprintf("%s:%s:%d:%s", ownerPID, sanitize(host), pid, ProcessStart(pid))
}

// UserOwner returns the owner label of boxes kept in a user's state.
func UserOwner(user string) string { return ownerUser + ":" + sanitize(user) }

// StateOwner returns the owner label of the boxes one state file of user
// keeps: UserOwner(user) for the user's default state file, and for
// another one (isDefault false) a digest of its absolute path too, so
// that a reaper working for one state never judges the boxes another
// state keeps.
func StateOwner(user, path string, isDefault bool) string {
	if !isDefault {
		sum := sha256.Sum256([]byte(path))
		user += "+" + hex.EncodeToString(sum[:4])
	}
	return UserOwner(user)
}

// IsUserOwner reports whether owner is a user's state (UserOwner).
func IsUserOwner(owner string) bool { return strings.HasPrefix(owner, ownerUser+":") }

func sanitize(s string) string {
	return strings.Map(func(r rune) rune {
		if r == ':' || r == ' ' {
			return '_'
		}
		return r
	}, s)
}

// ProcessStart returns the start time of pid in clock ticks since boot
// (field 22 of /proc/<pid>/stat), or "" when no such process runs (a
// zombie does not) or there is no /proc. With the pid it identifies a
// process across pid reuse.
func ProcessStart(pid int) string {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return ""
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return ""
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 20 || f[0] == "Z" || f[0] == "X" {
		return ""
	}
	return f[19]
}

// OwnerGone reports whether a pid owner on this host no longer runs. An
// owner of another kind, or on another host, is never gone.
func OwnerGone(owner string) bool {
	parts := strings.Split(owner, ":")
	if len(parts) != 4 || parts[0] != ownerPID {
		return false
	}
	host, _ := os.Hostname()
	if parts[1] != sanitize(host) {
		return false
	}
	pid, err := strconv.Atoi(parts[2])
	if err != nil || pid <= 0 {
		return false
	}
	start := ProcessStart(pid)
	return start == "" || (parts[3] != "" && start != parts[3])
}
