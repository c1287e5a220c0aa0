package pins_test

import (
	"bytes"
	"slices"
	"testing"

	"github.com/tangle-network/boxctl/pins"
)

func TestWriteTable(t *testing.T) {
	base := pins.Base{Reference: "deb", Digest: "sha256:1",
		Packages: []pins.DebianPackage{{Name: "tini", Version: "0.19.0-1"}, {Name: "bubblewrap", Version: "0.11.0-2"}}}
	node := pins.Node{Version: "22.23.5", NPM: pins.Package{Name: "npm", Version: "10.9.4"}}
	tests := []struct {
		name      string
		harnesses []pins.Harness
		want      string
	}{
		{
			name:      "unproven harness without platform packages",
			harnesses: []pins.Harness{{Name: "pi", Backend: "pi", Package: "@x/pi", Version: "1.2.3"}},
			want: "HARNESS  BACKEND  PACKAGE  VERSION  PLATFORMS  PROVEN\n" +
				"pi       pi       @x/pi    1.2.3    -          false\n",
		},
		{
			name: "proven harness with platforms",
			harnesses: []pins.Harness{{Name: "claude-code", Backend: "claude", Package: "@x/claude", Version: "2.0.1",
				Platforms: []pins.Package{{Platform: "linux/amd64"}, {Platform: "linux/arm64"}},
				Proven:    true, ProvenBy: []pins.Proof{{Vendor: "daytona"}, {Vendor: "docker"}}}},
			want: "HARNESS      BACKEND  PACKAGE    VERSION  PLATFORMS                PROVEN\n" +
				"claude-code  claude   @x/claude  2.0.1    linux/amd64,linux/arm64  true (daytona, docker)\n",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := &pins.Pins{Base: base, Node: node, Bridge: pins.Bridge{Version: "v0.3.0", Commit: "abc123"}, Harnesses: tt.harnesses}
			var buf bytes.Buffer
			if err := p.WriteTable(&buf); err != nil {
				t.Fatal(err)
			}
			want := "base    deb@sha256:1  tini=0.19.0-1 bubblewrap=0.11.0-2\n" +
				"node    22.23.5       npm 10.9.4\n" +
				"bridge  v0.3.0        abc123\n" +
				"\n" + tt.want
			if buf.String() != want {
				t.Errorf("WriteTable wrote\n%s\nwant\n%s", buf.String(), want)
			}
		})
	}
}

func TestWriteChecks(t *testing.T) {
	tests := []struct {
		name   string
		checks []pins.Check
		want   string
	}{
		{name: "none", want: "SUBJECT  PACKAGE  VERSION  PLATFORM  RESULT\n"},
		{
			name: "a pass and a platform failure",
			checks: []pins.Check{
				{Subject: "node", Package: "npm", Version: "10.9.4"},
				{Subject: "claude-code", Platform: "linux/arm64", Package: "@x/claude-arm64", Version: "2.0.1", Error: "integrity differs"},
			},
			want: "SUBJECT      PACKAGE          VERSION  PLATFORM     RESULT\n" +
				"node         npm              10.9.4   -            ok\n" +
				"claude-code  @x/claude-arm64  2.0.1    linux/arm64  FAIL: integrity differs\n",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var buf bytes.Buffer
			if err := pins.WriteChecks(&buf, tt.checks); err != nil {
				t.Fatal(err)
			}
			if buf.String() != tt.want {
				t.Errorf("WriteChecks wrote\n%s\nwant\n%s", buf.String(), tt.want)
			}
		})
	}
}

func TestHarnessNames(t *testing.T) {
	tests := []struct {
		harnesses []pins.Harness
		want      []string
	}{
		{nil, []string{}},
		{[]pins.Harness{{Name: "claude-code", Backend: "claude"}, {Name: "pi", Backend: "pi"}}, []string{"claude-code", "pi"}},
	}
	for _, tt := range tests {
		if got := (&pins.Pins{Harnesses: tt.harnesses}).HarnessNames(); !slices.Equal(got, tt.want) {
			t.Errorf("HarnessNames() = %q, want %q", got, tt.want)
		}
	}
}
