package harness

import (
	"fmt"
	"os"
	"path/filepath"
)

// File is a file an adapter wants in place before its harness starts.
type File struct {
	// Path is absolute, normally inside Turn.StateDir.
	Path string
	Data []byte
}

// WriteFiles writes files, creating parent directories (0700); each file
// is replaced atomically and readable only by its owner (0600), since
// generated configuration may name where secrets come from.
func WriteFiles(files []File) error {
	for _, f := range files {
		if !filepath.IsAbs(f.Path) {
			return fmt.Errorf("write harness file %q: path is not absolute", f.Path)
		}
		dir := filepath.Dir(f.Path)
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return fmt.Errorf("write harness file: %w", err)
		}
		tmp, err := os.CreateTemp(dir, ".tmp-"+filepath.Base(f.Path)+"-*")
		if err != nil {
			return fmt.Errorf("write harness file: %w", err)
		}
		_, werr := tmp.Write(f.Data)
		cerr := tmp.Close()
		if err := firstErr(werr, cerr, os.Chmod(tmp.Name(), 0o600)); err != nil {
			os.Remove(tmp.Name())
			return fmt.Errorf("write harness file %s: %w", f.Path, err)
		}
		if err := os.Rename(tmp.Name(), f.Path); err != nil {
			os.Remove(tmp.Name())
			return fmt.Errorf("write harness file: %w", err)
		}
	}
	return nil
}

func firstErr(errs ...error) error {
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}
