package boxproc

import (
	"bytes"
	"context"
	"fmt"
	"io/fs"
	"path"
	"strconv"
	"strings"
)

// MaxRead caps a file Box.Read returns.
const MaxRead = 256 << 20

// Exit statuses of the file scripts.
const (
	exitNoFile  = 44
	exitNotFile = 45
)

// readScript writes a tar stream of the regular file $0 on its stdout (as
// kubectl cp reads). A file still being written (a process's log) makes
// tar exit 1 with what it read: that is the file as it was.
const readScript = `[ -e "$0" ] || exit 44
[ -f "$0" ] || exit 45
tar -c -f - --warning=no-file-changed -C "$(dirname "$0")" -- "$(basename "$0")"
s=$?; [ $s -eq 1 ] && exit 0; exit $s`

// writeScript unpacks the tar stream on its stdin as the box user (so the
// file is theirs) next to the target $0, sets its mode to $1 and moves it
// into place.
const writeScript = `t=; d=$(dirname "$0") && mkdir -p "$d" && t=$(mktemp -d "$d/.boxctl-write.XXXXXX") &&
tar -x -f - -C "$t" --no-same-owner && chmod "$1" "$t/data" && mv -fT "$t/data" "$0"; s=$?; [ -z "$t" ] || rm -rf "$t"; exit $s`

// Read returns the content of the regular file p in the box, read as a
// tar stream by the box user; a missing file is fs.ErrNotExist.
func (b *Box) Read(ctx context.Context, p string) ([]byte, error) {
	if !path.IsAbs(p) {
		return nil, fmt.Errorf("%s: read %q: want an absolute path", b.Vendor, p)
	}
	// The archive is kept only up to the limit Read has.
	out := &Capped{Max: MaxRead + 64<<10}
	stderr := &Capped{Max: 4096}
	code, err := b.Runner.Run(ctx, Command{Op: "read", Argv: []string{"/bin/sh", "-c", readScript, p}, Stdout: out, Stderr: stderr})
	switch {
	case err != nil:
		return nil, fmt.Errorf("%s: read %s: %w", b.Vendor, p, err)
	case code == exitNoFile:
		return nil, fmt.Errorf("%s: read %s: %w", b.Vendor, p, fs.ErrNotExist)
	case code == exitNotFile:
		return nil, fmt.Errorf("%s: read %s: not a regular file", b.Vendor, p)
	case code != 0:
		return nil, fmt.Errorf("%s: read %s: tar exited %d: %s", b.Vendor, p, code, strings.TrimSpace(stderr.String()))
	}
	data, err := UntarFile(bytes.NewReader(out.Bytes()), MaxRead)
	if err != nil {
		return nil, fmt.Errorf("%s: read %s: %w", b.Vendor, p, err)
	}
	return data, nil
}

// Write creates or replaces the regular file p in the box (parents
// created) with data and mode (0: 0644), owned by the box user: a tar
// stream unpacked by that user next to p, then moved into place.
func (b *Box) Write(ctx context.Context, p string, data []byte, mode uint32) error {
	if err := WritePath(p); err != nil {
		return fmt.Errorf("%s: %w", b.Vendor, err)
	}
	if mode&0o7777 == 0 {
		mode = 0o644
	}
	archive, err := TarFile("data", data, mode)
	if err != nil {
		return fmt.Errorf("%s: write %s: %w", b.Vendor, p, err)
	}
	stderr := &Capped{Max: 4096}
	code, err := b.Runner.Run(ctx, Command{Op: "write", Argv: []string{"/bin/sh", "-c", writeScript, p, strconv.FormatUint(uint64(mode&0o7777), 8)},
		Stdin: bytes.NewReader(archive), Stderr: stderr})
	if err != nil {
		return fmt.Errorf("%s: write %s: %w", b.Vendor, p, err)
	}
	if code != 0 {
		return fmt.Errorf("%s: write %s: exited %d: %s", b.Vendor, p, code, strings.TrimSpace(stderr.String()))
	}
	return nil
}
