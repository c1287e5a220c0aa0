package release

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	cdx "github.com/CycloneDX/cyclonedx-go"
	"github.com/google/go-cmp/cmp"

	"github.com/tangle-network/boxctl/internal/goldentest"
)

func TestLayout(t *testing.T) {
	var b strings.Builder
	for _, a := range Layout("v1.2.3") {
		fmt.Fprintf(&b, "%s.tar.gz\n", a.Name)
		for _, e := range a.Entries {
			src := e.File
			if src == "" {
				src = e.Build.String()
			}
			fmt.Fprintf(&b, "  %s/%s <- %s\n", a.Name, e.Name, src)
		}
	}
	goldentest.Check(t, "testdata/layout.golden", []byte(b.String()))
}

// TestRun_Reproducible runs a release of a small command (this package's
// own) for this machine twice, into two directories and with the time's
// zone changed, and checks that the files are the same bytes, then what
// the archive, SHA256SUMS and the SBOM hold. (The test runs with the race
// detector, which slows gzip down: a box-bridge archive would take a
// minute.)
func TestRun_Reproducible(t *testing.T) {
	build := Build{Package: "./internal/release/cmd/release", Platform: Platform{"linux", runtime.GOARCH}}
	archive := Archive{Name: "release_vtest_linux_" + runtime.GOARCH, Entries: []Entry{
		{Name: "release", Build: build},
		{Name: "README.md", File: "README.md"},
	}}
	when := time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC)
	opts := Options{Dir: "../..", Version: "vtest", Commit: "0123456789abcdef", Time: when,
		LDFlags:  "-s -w -X github.com/tangle-network/boxctl/internal/buildinfo.version=vtest",
		Archives: []Archive{archive}}
	var outs [2]string
	var files [2][]File
	for i := range outs {
		outs[i] = t.TempDir()
		o := opts
		o.Out = outs[i]
		if i == 1 {
			o.Time = when.In(time.FixedZone("elsewhere", -7*3600))
		}
		var err error
		if files[i], err = Run(t.Context(), o); err != nil {
			t.Fatalf("Run %d: %v", i+1, err)
		}
	}
	names := []string{archive.Name + ".tar.gz", SBOMName("vtest"), SumsFile}
	var got []string
	for _, f := range files[0] {
		got = append(got, f.Name)
	}
	if diff := cmp.Diff(slices.Sorted(slices.Values(names)), got); diff != "" {
		t.Fatalf("Run wrote (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(files[0], files[1]); diff != "" {
		t.Fatalf("two runs differ (-first +second):\n%s", diff)
	}
	for _, name := range names {
		a, _ := os.ReadFile(filepath.Join(outs[0], name))
		b, _ := os.ReadFile(filepath.Join(outs[1], name))
		if !bytes.Equal(a, b) {
			t.Errorf("%s differs between two runs", name)
		}
		if fi, err := os.Stat(filepath.Join(outs[0], name)); err != nil || !fi.ModTime().Equal(when) {
			t.Errorf("%s: modified %v (%v), want %v", name, fi.ModTime(), err, when)
		}
	}

	sums, err := os.ReadFile(filepath.Join(outs[0], SumsFile))
	if err != nil {
		t.Fatal(err)
	}
	var want string
	for _, f := range files[0] {
		if f.Name != SumsFile {
			want += f.SHA256 + "  " + f.Name + "\n"
		}
	}
	if string(sums) != want {
		t.Errorf("SHA256SUMS = %q, want %q", sums, want)
	}
	checkArchive(t, filepath.Join(outs[0], archive.Name+".tar.gz"), archive.Name, when)
	checkSBOM(t, filepath.Join(outs[0], SBOMName("vtest")), when)
}

// checkArchive checks the entries of the archive at path: names in order,
// modes, owners and times, and the gzip header.
func checkArchive(t *testing.T, path, top string, when time.Time) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	if !zr.ModTime.IsZero() || zr.Name != "" {
		t.Errorf("gzip header: time %v, name %q, want neither", zr.ModTime, zr.Name)
	}
	type entry struct {
		Name       string
		Mode       int64
		UID, GID   int
		Uname      string
		ModTime    time.Time
		Executable bool // an ELF binary
	}
	var got []entry
	tr := tar.NewReader(zr)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		head := make([]byte, 4)
		_, _ = io.ReadFull(tr, head)
		got = append(got, entry{h.Name, h.Mode, h.Uid, h.Gid, h.Uname, h.ModTime.UTC(), string(head) == "\x7fELF"})
	}
	want := []entry{
		{Name: top + "/", Mode: 0o755, ModTime: when},
		{Name: top + "/README.md", Mode: 0o644, ModTime: when},
		{Name: top + "/release", Mode: 0o755, ModTime: when, Executable: true},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("archive entries (-want +got):\n%s", diff)
	}
}

// checkSBOM checks what the SBOM at path says of the release and of the
// release command's modules.
func checkSBOM(t *testing.T, path string, when time.Time) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var bom cdx.BOM
	if err := cdx.NewBOMDecoder(f, cdx.BOMFileFormatJSON).Decode(&bom); err != nil {
		t.Fatal(err)
	}
	const root = "pkg:golang/github.com/tangle-network/boxctl@vtest"
	const cmdRef = root + "#internal/release/cmd/release"
	if !strings.HasPrefix(bom.SerialNumber, "urn:uuid:") || bom.Metadata == nil || bom.Metadata.Component == nil ||
		bom.Metadata.Timestamp != when.Format(time.RFC3339) || bom.Metadata.Component.BOMRef != root ||
		bom.Metadata.Component.Version != "vtest" {
		t.Fatalf("SBOM serial %q, metadata %+v: want a UUID URN, %s at %v", bom.SerialNumber, bom.Metadata, root, when)
	}
	refs := map[string]bool{}
	for _, c := range *bom.Components {
		refs[c.BOMRef] = true
	}
	deps := map[string][]string{}
	for _, d := range *bom.Dependencies {
		deps[d.Ref] = *d.Dependencies
	}
	// The command writes the SBOM with cyclonedx-go.
	var lib, std bool
	for _, ref := range deps[cmdRef] {
		if !refs[ref] {
			t.Errorf("dependency %s of %s is no component", ref, cmdRef)
		}
		lib = lib || strings.HasPrefix(ref, "pkg:golang/github.com/CycloneDX/cyclonedx-go@v")
		std = std || ref == "pkg:golang/stdlib@"+runtime.Version()
	}
	if !refs[cmdRef] || !slices.Equal(deps[root], []string{cmdRef}) || !lib || !std {
		t.Errorf("SBOM: %s depends on %v, %s on %v: want the command, then cyclonedx-go and stdlib@%s",
			root, deps[root], cmdRef, deps[cmdRef], runtime.Version())
	}
}

func TestRun_Refusals(t *testing.T) {
	tests := []struct {
		name string
		opts Options
		want string
	}{
		{"no version", Options{Time: time.Unix(1, 0)}, "version"},
		{"version with a slash", Options{Version: "v1/2", Time: time.Unix(1, 0)}, "version"},
		{"no time", Options{Version: "v1"}, "SOURCE_DATE_EPOCH"},
		{"build fails", Options{Version: "v1", Time: time.Unix(1, 0), Dir: "../..", Out: "",
			Archives: []Archive{{Name: "x", Entries: []Entry{{Name: "x", Build: Build{"./nonexistent", Platform{"linux", "amd64"}}}}}}},
			"build nonexistent linux/amd64"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.opts.Out = t.TempDir()
			if _, err := Run(t.Context(), tt.opts); err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("Run(%+v) = %v, want an error about %s", tt.opts, err, tt.want)
			}
		})
	}
}
