package buildinfo

import (
	"runtime/debug"
	"testing"
)

func TestResolve(t *testing.T) {
	withVCS := func() (*debug.BuildInfo, bool) {
		return &debug.BuildInfo{
			Main: debug.Module{Version: "(devel)"},
			Settings: []debug.BuildSetting{
				{Key: "vcs.revision", Value: "0123456789abcdef0123"},
				{Key: "vcs.modified", Value: "true"},
			},
		}, true
	}
	none := func() (*debug.BuildInfo, bool) { return nil, false }
	tests := []struct {
		name       string
		v, c       string
		read       func() (*debug.BuildInfo, bool)
		want       Info
		wantString string
	}{
		{"stamped wins", "v1.2.3", "abc", withVCS, Info{"v1.2.3", "abc", true}, "v1.2.3 (abc-dirty)"},
		{"vcs fallback", "", "", withVCS, Info{"dev", "0123456789abcdef0123", true}, "dev (0123456789ab-dirty)"},
		{"nothing known", "", "", none, Info{"dev", "unknown", false}, "dev (unknown)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := resolve(tt.v, tt.c, tt.read)
			if got != tt.want {
				t.Errorf("resolve() = %+v, want %+v", got, tt.want)
			}
			if s := got.String(); s != tt.wantString {
				t.Errorf("String() = %q, want %q", s, tt.wantString)
			}
		})
	}
}
