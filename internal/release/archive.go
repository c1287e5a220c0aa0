package release

import (
	"archive/tar"
	"compress/gzip"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// writeArchive writes a as a tar.gz to w: the directory a.Name/, then its
// entries sorted by name, every one owned by uid and gid 0 and dated
// opts.Time, binaries mode 0755 and other files 0644. The gzip header
// holds neither a name nor a time.
func writeArchive(w io.Writer, a Archive, opts Options, bins map[Build]string) error {
	zw, err := gzip.NewWriterLevel(w, gzip.DefaultCompression)
	if err != nil {
		return err
	}
	tw := tar.NewWriter(zw)
	hdr := func(name string, typ byte, mode, size int64) *tar.Header {
		return &tar.Header{Typeflag: typ, Name: name, Mode: mode, Size: size, ModTime: opts.Time}
	}
	if err := tw.WriteHeader(hdr(a.Name+"/", tar.TypeDir, 0o755, 0)); err != nil {
		return err
	}
	entries := slices.SortedFunc(slices.Values(a.Entries), func(x, y Entry) int { return strings.Compare(x.Name, y.Name) })
	for _, e := range entries {
		src, mode := bins[e.Build], int64(0o755)
		if e.File != "" {
			src, mode = filepath.Join(opts.Dir, e.File), 0o644
		}
		if err := addFile(tw, hdr(a.Name+"/"+e.Name, tar.TypeReg, mode, 0), src); err != nil {
			return fmt.Errorf("%s: %w", e.Name, err)
		}
	}
	if err := tw.Close(); err != nil {
		return err
	}
	return zw.Close()
}

// addFile writes the file at src into tw under h.
func addFile(tw *tar.Writer, h *tar.Header, src string) error {
	f, err := os.Open(src)
	if err != nil {
		return err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return err
	}
	h.Size = fi.Size()
	if err := tw.WriteHeader(h); err != nil {
		return err
	}
	_, err = io.Copy(tw, f)
	return err
}
