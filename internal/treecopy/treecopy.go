// Package treecopy copies files and directory trees: directories, regular
// files and symbolic links, with their permission bits, leaving out the
// paths it is told to. The bridge's workspace checkpoints and forks are
// such copies, and so is the bridge binary in an image build context.
package treecopy

import (
	"context"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
)

// Copy copies the tree at src to dst, which must not exist, skipping every
// path in skip (absolute, cleaned) and whatever is below it. Files other
// than directories, regular files and symbolic links are skipped. The copy
// is made beside dst and renamed into place, so dst appears whole or not
// at all. It stops between files when ctx ends.
func Copy(ctx context.Context, src, dst string, skip ...string) error {
	tmp := dst + ".partial"
	if err := os.RemoveAll(tmp); err != nil {
		return fmt.Errorf("copy %s: %w", src, err)
	}
	if err := os.MkdirAll(filepath.Dir(dst), 0o700); err != nil {
		return fmt.Errorf("copy %s: %w", src, err)
	}
	err := filepath.WalkDir(src, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		for _, s := range skip {
			if path == s && path != src {
				if d.IsDir() {
					return filepath.SkipDir
				}
				return nil
			}
		}
		rel, err := filepath.Rel(src, path)
		if err != nil {
			return err
		}
		to := filepath.Join(tmp, rel)
		info, err := d.Info()
		if err != nil {
			return err
		}
		switch {
		case d.IsDir():
			return os.Mkdir(to, info.Mode().Perm()|0o700)
		case d.Type()&fs.ModeSymlink != 0:
			target, err := os.Readlink(path)
			if err != nil {
				return err
			}
			return os.Symlink(target, to)
		case d.Type().IsRegular():
			return CopyFile(path, to, info.Mode().Perm())
		}
		return nil
	})
	if err == nil {
		err = os.Rename(tmp, dst)
	}
	if err != nil {
		os.RemoveAll(tmp)
		return fmt.Errorf("copy %s to %s: %w", src, dst, err)
	}
	return nil
}

// CopyFile copies the regular file from to the file to, created or
// truncated with mode perm.
func CopyFile(from, to string, perm fs.FileMode) error {
	in, err := os.Open(from)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(to, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, perm)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}
