package boximage_test

import (
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/tangle-network/boxctl/boximage"
	"github.com/tangle-network/boxctl/pins"
)

// lineChange is one line that differs between two renders of equal length.
type lineChange struct{ Old, New string }

func changedLines(t *testing.T, a, b []byte) []lineChange {
	t.Helper()
	al, bl := strings.Split(string(a), "\n"), strings.Split(string(b), "\n")
	if len(al) != len(bl) {
		t.Fatalf("renders differ in length: %d and %d lines", len(al), len(bl))
	}
	var out []lineChange
	for i := range al {
		if al[i] != bl[i] {
			out = append(out, lineChange{strings.TrimSpace(al[i]), strings.TrimSpace(bl[i])})
		}
	}
	return out
}

// bumpPi moves the pi row to 1.6.1 as pins bump would: version, integrity,
// pattern, unproven, and a lock whose top entry carries the new release.
func bumpPi(t *testing.T, p *pins.Pins, integrity string) *pins.Pins {
	t.Helper()
	out := p.Clone()
	h, _ := out.Harness("pi")
	top := "node_modules/" + h.Package
	// Edit the raw entry in place, as npm would write the new release's.
	raw := string(h.Lock.Packages[top])
	for _, r := range []struct{ re, repl string }{
		{`"version":(\s*)"1\.6\.0"`, `"version":${1}"1.6.1"`},
		{`pi-coding-agent-1\.6\.0\.tgz`, `pi-coding-agent-1.6.1.tgz`},
		{regexp.QuoteMeta(h.Integrity), integrity},
	} {
		re := regexp.MustCompile(r.re)
		if !re.MatchString(raw) {
			t.Fatalf("pi lock entry lacks %s", r.re)
		}
		raw = re.ReplaceAllString(raw, r.repl)
	}
	lock := &pins.Lock{Packages: map[string]json.RawMessage{}}
	for k, v := range h.Lock.Packages {
		lock.Packages[k] = v
	}
	lock.Packages[top] = json.RawMessage(raw)
	h.Version, h.Integrity, h.VersionPattern, h.Proven, h.Lock = "1.6.1", integrity, `^1\.6\.1$`, false, lock
	if err := out.Validate(); err != nil {
		t.Fatalf("bumped pins: %v", err)
	}
	return out
}

// TestRender_pinChange checks that changing one pin changes exactly the
// lines that carry it, in the Dockerfile and in the lockfile.
func TestRender_pinChange(t *testing.T) {
	p := loadPins(t)
	p.Harnesses[2].Proven = true // pi, so the bump visibly unproves it
	newInt := p.Harnesses[0].Integrity
	const L = "io.github.tangle-network.boxctl."
	oldInt := p.Harnesses[2].Integrity
	otherDigest := "sha256:" + strings.Repeat("cd", 32)
	tests := []struct {
		name   string
		mutate func(*pins.Pins) *pins.Pins
		want   []lineChange
	}{
		{"harness bump", func(p *pins.Pins) *pins.Pins { return bumpPi(t, p, newInt) }, []lineChange{
			{"# pi 1.6.0 (@earendil-works/pi-coding-agent@1.6.0), installed with npm ci from its lock under its own prefix.",
				"# pi 1.6.1 (@earendil-works/pi-coding-agent@1.6.1), installed with npm ci from its lock under its own prefix."},
			{`printf '%s\n' "$out" | grep -Eq '^1\.6\.0$' || { echo "pi --version printed: $out" >&2; exit 1; }`,
				`printf '%s\n' "$out" | grep -Eq '^1\.6\.1$' || { echo "pi --version printed: $out" >&2; exit 1; }`},
			{L + `harness.pi.integrity="` + oldInt + `" \`, L + `harness.pi.integrity="` + newInt + `" \`},
			{L + `harness.pi.proven="true" \`, L + `harness.pi.proven="false" \`},
			{L + `harness.pi.version="1.6.0" \`, L + `harness.pi.version="1.6.1" \`},
		}},
		{"base digest", func(p *pins.Pins) *pins.Pins {
			out := p.Clone()
			out.Base.Digest = otherDigest
			return out
		}, []lineChange{
			{"FROM " + p.Base.Image(), "FROM " + p.Base.Reference + "@" + otherDigest},
			{`org.opencontainers.image.base.digest="` + p.Base.Digest + `" \`, `org.opencontainers.image.base.digest="` + otherDigest + `" \`},
		}},
		{"Debian package", func(p *pins.Pins) *pins.Pins {
			out := p.Clone()
			out.Base.Packages[0].Version = "0.19.0-1+b4"
			return out
		}, []lineChange{
			{"tini=0.19.0-1+b3 \\", "tini=0.19.0-1+b4 \\"},
			{L + `base.packages="tini=0.19.0-1+b3 bubblewrap=0.8.0-2+deb12u1" \`, L + `base.packages="tini=0.19.0-1+b4 bubblewrap=0.8.0-2+deb12u1" \`},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := render(t, p, boximage.RenderOptions{Harnesses: []string{"pi", "codex"}})
			after := render(t, tt.mutate(p), boximage.RenderOptions{Harnesses: []string{"pi", "codex"}})
			if diff := cmp.Diff(tt.want, changedLines(t, before.Dockerfile, after.Dockerfile)); diff != "" {
				t.Errorf("Dockerfile changed lines (-want +got):\n%s", diff)
			}
			for _, f := range []string{"harness/codex/package.json", "harness/codex/package-lock.json", boximage.InitFile} {
				if string(before.Files[f]) != string(after.Files[f]) {
					t.Errorf("%s changed, but its pins did not", f)
				}
			}
		})
	}

	t.Run("harness bump lockfile", func(t *testing.T) {
		h, _ := p.Harness("pi")
		pj, pl, err := boximage.RenderLockfile(*h)
		if err != nil {
			t.Fatal(err)
		}
		nh, _ := bumpPi(t, p, newInt).Harness("pi")
		npj, npl, err := boximage.RenderLockfile(*nh)
		if err != nil {
			t.Fatal(err)
		}
		pkg := fmt.Sprintf(`"%s": `, h.Package)
		want := []lineChange{{pkg + `"1.6.0"`, pkg + `"1.6.1"`}}
		if diff := cmp.Diff(want, changedLines(t, pj, npj)); diff != "" {
			t.Errorf("package.json changed lines (-want +got):\n%s", diff)
		}
		want = []lineChange{
			{pkg + `"1.6.0"`, pkg + `"1.6.1"`}, // root entry dependency
			{`"version": "1.6.0",`, `"version": "1.6.1",`},
			{`"resolved": "https://registry.npmjs.org/@earendil-works/pi-coding-agent/-/pi-coding-agent-1.6.0.tgz",`,
				`"resolved": "https://registry.npmjs.org/@earendil-works/pi-coding-agent/-/pi-coding-agent-1.6.1.tgz",`},
			{`"integrity": "` + oldInt + `",`, `"integrity": "` + newInt + `",`},
		}
		if diff := cmp.Diff(want, changedLines(t, pl, npl)); diff != "" {
			t.Errorf("package-lock.json changed lines (-want +got):\n%s", diff)
		}
	})
}
