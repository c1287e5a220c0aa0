package docker

import (
	"encoding/json"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/oci"
	"github.com/google/go-cmp/cmp"
	"github.com/moby/profiles/seccomp"

	"github.com/tangle-network/boxctl/internal/goldentest"
)

// profileDiff splits got against Docker's default profile: the rules got
// adds (in order) and the rules of the default got lacks or changes.
func profileDiff(t *testing.T, got *seccomp.Seccomp) (added []json.RawMessage, lost []string) {
	t.Helper()
	def := seccomp.DefaultProfile()
	enc := func(r *seccomp.Syscall) string {
		b, err := json.Marshal(r)
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	have := map[string]int{}
	for _, r := range got.Syscalls {
		have[enc(r)]++
	}
	for _, r := range def.Syscalls {
		if k := enc(r); have[k] > 0 {
			have[k]--
		} else {
			lost = append(lost, k)
		}
	}
	for _, r := range got.Syscalls {
		if k := enc(r); have[k] > 0 {
			have[k]--
			added = append(added, json.RawMessage(k))
		}
	}
	return added, lost
}

// TestJailProfile_IsDefaultPlusJailRules checks the profile boxes run
// under, as the engine receives it: Docker's default profile unchanged
// (its default action, architectures and every rule) plus exactly the
// rules in testdata/jail-seccomp-additions.golden.json.
func TestJailProfile_IsDefaultPlusJailRules(t *testing.T) {
	opt, err := jailSeccomp()
	if err != nil {
		t.Fatal(err)
	}
	raw, ok := strings.CutPrefix(opt, "seccomp=")
	if !ok {
		t.Fatalf("security option %.40q... does not start with seccomp=", opt)
	}
	if strings.Contains(strings.ToLower(raw), "unconfined") {
		t.Error("the profile mentions unconfined")
	}
	var got seccomp.Seccomp
	if err := json.Unmarshal([]byte(raw), &got); err != nil {
		t.Fatalf("the profile is not a seccomp profile: %v", err)
	}
	def := seccomp.DefaultProfile()
	if got.DefaultAction != def.DefaultAction || got.DefaultErrnoRet == nil || *got.DefaultErrnoRet != *def.DefaultErrnoRet ||
		!cmp.Equal(got.ArchMap, def.ArchMap) {
		t.Errorf("default action %s (errno %v), arches %v; want Docker's default %s (errno %v), %v",
			got.DefaultAction, got.DefaultErrnoRet, got.ArchMap, def.DefaultAction, *def.DefaultErrnoRet, def.ArchMap)
	}
	added, lost := profileDiff(t, &got)
	if len(lost) > 0 {
		t.Errorf("the profile drops or changes %d rules of Docker's default:\n%s", len(lost), strings.Join(lost, "\n"))
	}
	diff, err := json.MarshalIndent(added, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	diff = append(diff, '\n')
	goldentest.Check(t, filepath.Join("testdata", "jail-seccomp-additions.golden.json"), diff)
}

// TestJailProfile_AddsOnlyNamespaceCalls checks every added rule against
// the calls bubblewrap needs, so a rule cannot be widened by regenerating
// the golden file alone.
func TestJailProfile_AddsOnlyNamespaceCalls(t *testing.T) {
	allowed := map[string]bool{"clone": true, "unshare": true, "mount": true, "umount2": true, "pivot_root": true}
	for _, r := range jailRules {
		for _, n := range r.Names {
			if !allowed[n] {
				t.Errorf("jail rule allows %s, which bubblewrap does not need", n)
			}
			if (n == "clone" || n == "unshare") && len(r.Args) == 0 {
				t.Errorf("jail rule allows %s with any flags, want only with CLONE_NEWUSER", n)
			}
		}
		if r.Action != "SCMP_ACT_ALLOW" || r.Includes != nil && len(r.Includes.Caps) > 0 {
			t.Errorf("jail rule %v: action %s, includes %+v; want an allow for every box", r.Names, r.Action, r.Includes)
		}
	}
}

func TestJailConfine(t *testing.T) {
	var hc container.HostConfig
	hc.SecurityOpt = []string{"no-new-privileges:true"}
	if err := jailConfine(&hc); err != nil {
		t.Fatal(err)
	}
	if len(hc.SecurityOpt) != 2 || hc.SecurityOpt[0] != "no-new-privileges:true" || !strings.HasPrefix(hc.SecurityOpt[1], "seccomp={") {
		t.Errorf("security options = %.80q, want no-new-privileges and the jail profile", hc.SecurityOpt)
	}
	for _, o := range hc.SecurityOpt {
		if strings.Contains(o, "unconfined") {
			t.Errorf("security option %.60q... is unconfined", o)
		}
	}
	def := oci.DefaultLinuxSpec().Linux
	for _, tc := range []struct {
		name      string
		got, dflt []string
	}{
		{"masked", hc.MaskedPaths, def.MaskedPaths},
		{"read-only", hc.ReadonlyPaths, def.ReadonlyPaths},
	} {
		if tc.got == nil {
			t.Errorf("%s paths are nil, which means the engine's defaults", tc.name)
		}
		for _, p := range tc.dflt {
			underProc := strings.HasPrefix(p, "/proc/")
			if slices.Contains(tc.got, p) == underProc {
				t.Errorf("%s path %s: kept %v, want kept exactly when outside /proc", tc.name, p, !underProc)
			}
		}
		for _, p := range tc.got {
			if !slices.Contains(tc.dflt, p) {
				t.Errorf("%s path %s is not one of Docker's defaults", tc.name, p)
			}
		}
	}
	if !slices.Contains(hc.MaskedPaths, "/sys/firmware") {
		t.Errorf("masked paths %v lack /sys/firmware", hc.MaskedPaths)
	}
}
