package reaper_test

import (
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"

	"github.com/tangle-network/boxctl/vendors/reaper"
)

func TestStateOwner(t *testing.T) {
	tests := []struct {
		name, user, path string
		isDefault        bool
		want             string
	}{
		{"default state", "ann", "/home/ann/.local/state/boxctl/boxes.json", true, "user:ann"},
		{"other state", "ann", "/tmp/s/boxes.json", false, "user:ann+"},
		{"sanitized", "a b:c", "/x", true, "user:a_b_c"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := reaper.StateOwner(tt.user, tt.path, tt.isDefault)
			if !strings.HasPrefix(got, tt.want) || (tt.isDefault && got != tt.want) {
				t.Errorf("StateOwner(%q, %q, %v) = %q, want %q...", tt.user, tt.path, tt.isDefault, got, tt.want)
			}
			if !reaper.IsUserOwner(got) {
				t.Errorf("IsUserOwner(%q) = false, want true", got)
			}
		})
	}
	if a, b := reaper.StateOwner("ann", "/a", false), reaper.StateOwner("ann", "/b", false); a == b {
		t.Errorf("two state files share the owner %q", a)
	}
}

func TestOwnerGone(t *testing.T) {
	cmd := exec.Command("true")
	if err := cmd.Run(); err != nil {
		t.Fatal(err)
	}
	host, _ := os.Hostname()
	self := reaper.ProcessOwner()
	dead := "pid:" + strings.ReplaceAll(host, ":", "_") + ":" + strconv.Itoa(cmd.Process.Pid) + ":1"
	parts := strings.Split(self, ":")
	reused := strings.Join(append(parts[:3:3], "1"), ":")
	tests := []struct {
		owner string
		want  bool
	}{
		{self, false},
		{dead, true},
		{reused, true}, // this pid, another start time: another process
		{"pid:some-other-host:1:1", false},
		{reaper.UserOwner("ann"), false},
		{"", false},
	}
	for _, tt := range tests {
		if got := reaper.OwnerGone(tt.owner); got != tt.want {
			t.Errorf("OwnerGone(%q) = %v, want %v", tt.owner, got, tt.want)
		}
	}
	if reaper.IsUserOwner(self) {
		t.Errorf("IsUserOwner(%q) = true, want false", self)
	}
}

func TestProcessStart(t *testing.T) {
	if got := reaper.ProcessStart(os.Getpid()); got == "" {
		t.Errorf("ProcessStart(self) = %q, want the start time", got)
	}
	if got := reaper.ProcessStart(1 << 30); got != "" {
		t.Errorf("ProcessStart(no such pid) = %q, want \"\"", got)
	}
}
