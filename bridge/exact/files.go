package exact

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/tangle-network/boxctl/bridge/wire"
)

// Files of an environment are those of its /tmp, which is its directory
// on the host. They are reached through an os.Root of that directory, so
// a link a process made there never leads the bridge outside it.

func (m *Manager) root(ctx context.Context, id, path string) (*os.Root, string, int64, error) {
	rel, err := wire.ExactPath(path)
	if err != nil {
		return nil, "", 0, &RequestError{Msg: err.Error()}
	}
	_, env, err := m.live(ctx, id)
	if err != nil {
		return nil, "", 0, err
	}
	r, err := os.OpenRoot(m.tmpDir(id))
	if err != nil {
		return nil, "", 0, fmt.Errorf("open exact environment files: %w", err)
	}
	return r, rel, min(int64(wire.MaxExactFileBytes), env.Resources.DiskMB<<20), nil
}

// WriteFile writes data to path (under /tmp) of a live environment with
// the POSIX mode mode, creating its parent directories.
func (m *Manager) WriteFile(ctx context.Context, id, path string, mode int, data []byte) (wire.ExactFile, error) {
	if mode < 0 || mode > 0o7777 {
		return wire.ExactFile{}, &RequestError{Msg: "mode must be 0 to 07777"}
	}
	r, rel, limit, err := m.root(ctx, id, path)
	if err != nil {
		return wire.ExactFile{}, err
	}
	defer r.Close()
	if int64(len(data)) > limit {
		return wire.ExactFile{}, &RequestError{Msg: fmt.Sprintf("a file of an exact environment holds at most %d bytes", limit)}
	}
	if dir := filepath.Dir(rel); dir != "." {
		if err := r.MkdirAll(dir, 0o755); err != nil {
			return wire.ExactFile{}, pathError(path, err)
		}
	}
	f, err := r.OpenFile(rel, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return wire.ExactFile{}, pathError(path, err)
	}
	_, err = f.Write(data)
	// The mode is set on the open file, whatever the umask was.
	err = errors.Join(err, f.Chmod(fileMode(mode)), f.Close())
	if err != nil {
		return wire.ExactFile{}, fmt.Errorf("write %s: %w", path, err)
	}
	return wire.ExactFile{Path: path, Size: int64(len(data))}, nil
}

// fileMode is a POSIX mode with its setuid, setgid and sticky bits as Go
// names them.
func fileMode(mode int) fs.FileMode {
	m := fs.FileMode(mode & 0o777)
	if mode&0o4000 != 0 {
		m |= fs.ModeSetuid
	}
	if mode&0o2000 != 0 {
		m |= fs.ModeSetgid
	}
	if mode&0o1000 != 0 {
		m |= fs.ModeSticky
	}
	return m
}

// ReadFile reads path (under /tmp) of a live environment: ErrTooLarge
// when the file holds more than maxBytes, before any of it is read.
func (m *Manager) ReadFile(ctx context.Context, id, path string, maxBytes int64) (wire.ExactFile, []byte, error) {
	if maxBytes < 1 {
		return wire.ExactFile{}, nil, &RequestError{Msg: "maxBytes must be positive"}
	}
	r, rel, _, err := m.root(ctx, id, path)
	if err != nil {
		return wire.ExactFile{}, nil, err
	}
	defer r.Close()
	f, err := r.Open(rel)
	if err != nil {
		return wire.ExactFile{}, nil, pathError(path, err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return wire.ExactFile{}, nil, pathError(path, err)
	}
	if !fi.Mode().IsRegular() {
		return wire.ExactFile{}, nil, &RequestError{Msg: path + " is not a regular file"}
	}
	limit := min(maxBytes, int64(wire.MaxExactFileBytes))
	if fi.Size() > limit {
		return wire.ExactFile{}, nil, ErrTooLarge
	}
	// A file that grew since its stat is still held to the bound.
	data, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return wire.ExactFile{}, nil, fmt.Errorf("read %s: %w", path, err)
	}
	if int64(len(data)) > limit {
		return wire.ExactFile{}, nil, ErrTooLarge
	}
	return wire.ExactFile{Path: path, Size: int64(len(data))}, data, nil
}

// pathError is a failed file operation: a missing file is ErrNotFound,
// one that leads outside the environment or names a directory a
// RequestError.
func pathError(path string, err error) error {
	if errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("%w: %s", ErrNotFound, path)
	}
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return &RequestError{Msg: fmt.Sprintf("%s: %v", path, pe.Err)}
	}
	return err
}
