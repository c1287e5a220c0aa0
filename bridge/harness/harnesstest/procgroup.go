package harnesstest

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tangle-network/boxctl/bridge/store"
	"github.com/tangle-network/boxctl/internal/polltest"
	"github.com/tangle-network/boxctl/internal/routerstub"
)

// GroupMembers lists the live (not zombie) processes in process group
// pgid.
func GroupMembers(pgid int) []int {
	var out []int
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		s := string(b)
		f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
		if len(f) > 2 && f[0] != "Z" && f[2] == strconv.Itoa(pgid) {
			out = append(out, pid)
		}
	}
	return out
}

// GroupAlive reports whether process group pgid has a live member.
func GroupAlive(pgid int) bool { return len(GroupMembers(pgid)) > 0 }

// WaitGone waits until process group pgid has no live member, and fails
// t if it still has one after 15 seconds.
func WaitGone(t *testing.T, pgid int) {
	t.Helper()
	polltest.UntilNil(t, 15*time.Second, fmt.Sprintf("process group %d to have no live member", pgid), func() error {
		if m := GroupMembers(pgid); len(m) > 0 {
			return fmt.Errorf("members %v", m)
		}
		return nil
	})
}

// RunGroup is the process group st recorded for run id.
func RunGroup(t *testing.T, st *store.Store, id string) int {
	t.Helper()
	r, err := st.GetRun(t.Context(), id)
	if err != nil || r.PGID <= 0 {
		t.Fatalf("run %s: process group %d, %v", id, r.PGID, err)
	}
	return r.PGID
}

// RunGroup is the process group l's store recorded for run id.
func (l *Live) RunGroup(t *testing.T, id string) int {
	t.Helper()
	return RunGroup(t, l.Store, id)
}

// MainRequests are stub's recorded model requests of the conversation
// itself (not side calls such as titles), from index from on.
func MainRequests(stub *routerstub.Server, from int) []routerstub.Request {
	var out []routerstub.Request
	for _, r := range stub.Requests()[from:] {
		if r.Family != routerstub.FamilyNone && !r.Side {
			out = append(out, r)
		}
	}
	return out
}
