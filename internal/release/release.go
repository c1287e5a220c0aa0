package release

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// Options configure a release. Version and Time are required.
type Options struct {
	// Dir is the module's root; default ".".
	Dir string
	// Out is the directory the files go to, created if missing; default
	// "dist".
	Out string
	// Version names the files and the SBOM's component ("v1.2.0").
	Version string
	// Commit is the commit built, recorded in the SBOM.
	Commit string
	// LDFlags are go build's -ldflags: the Makefile's, which stamp the
	// version and commit into internal/buildinfo.
	LDFlags string
	// Time dates every archive entry, the files written and the SBOM:
	// the commit's time (SOURCE_DATE_EPOCH) in a reproducible build.
	Time time.Time
	// Archives are the archives to write; default Layout(Version).
	Archives []Archive
	// Go is the go command; default "go".
	Go string
	// Env is added to the environment of go build (after the settings
	// that make builds reproducible, which it can override).
	Env []string
	// Log receives a line per step; default none.
	Log io.Writer
}

func (o *Options) normalize() error {
	if o.Version == "" || strings.ContainsAny(o.Version, "/\\ ") {
		return fmt.Errorf("version %q: want a version usable in file names", o.Version)
	}
	if o.Time.IsZero() {
		return errors.New("no time for the files: set SOURCE_DATE_EPOCH")
	}
	o.Time = o.Time.UTC().Truncate(time.Second)
	o.Dir = cmp.Or(o.Dir, ".")
	o.Out = cmp.Or(o.Out, "dist")
	o.Go = cmp.Or(o.Go, "go")
	if o.Archives == nil {
		o.Archives = Layout(o.Version)
	}
	if o.Log == nil {
		o.Log = io.Discard
	}
	return nil
}

// File is a file the release wrote.
type File struct {
	// Name is the file's name in Options.Out.
	Name string
	// Size is its size in bytes.
	Size int64
	// SHA256 is its SHA-256 digest, in hex.
	SHA256 string
}

// SumsFile is the name of the checksum file, in sha256sum's format.
const SumsFile = "SHA256SUMS"

// SBOMName is the name of the SBOM file of version.
func SBOMName(version string) string { return "boxctl_" + version + ".cdx.json" }

// Run builds every binary the archives hold, writes the archives, the
// SBOM and SHA256SUMS (over the other two) to opts.Out, and returns the
// files written, sorted by name.
func Run(ctx context.Context, opts Options) ([]File, error) {
	if err := opts.normalize(); err != nil {
		return nil, err
	}
	work, err := os.MkdirTemp("", "boxctl-release-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(work)
	bins, err := buildAll(ctx, opts, work)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(opts.Out, 0o755); err != nil {
		return nil, err
	}
	var files []File
	for _, a := range opts.Archives {
		fmt.Fprintf(opts.Log, "archive %s.tar.gz\n", a.Name)
		f, err := writeFile(opts, a.Name+".tar.gz", func(w io.Writer) error { return writeArchive(w, a, opts, bins) })
		if err != nil {
			return nil, err
		}
		files = append(files, f)
	}
	f, err := writeFile(opts, SBOMName(opts.Version), func(w io.Writer) error { return writeSBOM(w, opts, bins, files) })
	if err != nil {
		return nil, err
	}
	files = append(files, f)
	slices.SortFunc(files, func(a, b File) int { return strings.Compare(a.Name, b.Name) })
	f, err = writeFile(opts, SumsFile, func(w io.Writer) error {
		for _, f := range files {
			if _, err := fmt.Fprintf(w, "%s  %s\n", f.SHA256, f.Name); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	files = append(files, f)
	slices.SortFunc(files, func(a, b File) int { return strings.Compare(a.Name, b.Name) })
	return files, nil
}

// buildAll builds each distinct binary the archives hold into work and
// returns their paths.
func buildAll(ctx context.Context, opts Options, work string) (map[Build]string, error) {
	bins := map[Build]string{}
	for _, a := range opts.Archives {
		for _, e := range a.Entries {
			if e.File != "" || bins[e.Build] != "" {
				continue
			}
			out := filepath.Join(work, e.Build.Platform.OS+"_"+e.Build.Platform.Arch, filepath.Base(e.Build.Package))
			fmt.Fprintf(opts.Log, "build %s\n", e.Build)
			if err := goBuild(ctx, opts, e.Build, out); err != nil {
				return nil, err
			}
			bins[e.Build] = out
		}
	}
	return bins, nil
}

// goBuild builds b at out: -trimpath, CGO off, no VCS stamp, the
// architecture levels fixed at Go's defaults, opts.LDFlags.
func goBuild(ctx context.Context, opts Options, b Build, out string) error {
	cmd := exec.CommandContext(ctx, opts.Go, "build", "-trimpath", "-buildvcs=false", "-ldflags", opts.LDFlags, "-o", out, b.Package)
	cmd.Dir = opts.Dir
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS="+b.Platform.OS, "GOARCH="+b.Platform.Arch,
		"GOAMD64=v1", "GOARM64=v8.0", "GOFLAGS=-mod=readonly")
	cmd.Env = append(cmd.Env, opts.Env...)
	if output, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("build %s: %w\n%s", b, err, output)
	}
	return nil
}

// writeFile writes opts.Out/name with write, dates it opts.Time and
// returns its size and digest.
func writeFile(opts Options, name string, write func(io.Writer) error) (File, error) {
	path := filepath.Join(opts.Out, name)
	f, err := os.Create(path)
	if err != nil {
		return File{}, err
	}
	h := sha256.New()
	n := &countWriter{w: io.MultiWriter(f, h)}
	err = write(n)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Chtimes(path, opts.Time, opts.Time)
	}
	if err != nil {
		return File{}, fmt.Errorf("write %s: %w", name, err)
	}
	return File{Name: name, Size: n.n, SHA256: hex.EncodeToString(h.Sum(nil))}, nil
}

type countWriter struct {
	w io.Writer
	n int64
}

func (c *countWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}
