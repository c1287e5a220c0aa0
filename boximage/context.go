package boximage

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"maps"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"

	"github.com/tangle-network/boxctl/internal/treecopy"
)

// DefaultTag derives an image tag from what opts builds: the Dockerfile,
// the build arguments and the platform.
func DefaultTag(opts BuildOptions) string {
	h := sha256.New()
	h.Write(opts.Dockerfile)
	for _, k := range slices.Sorted(maps.Keys(opts.BuildArgs)) {
		fmt.Fprintf(h, "\x00%s=%s", k, opts.BuildArgs[k])
	}
	fmt.Fprintf(h, "\x00%s", opts.Platform)
	return "b" + hex.EncodeToString(h.Sum(nil))[:12]
}

// WithTag adds tag to a reference that has none (no tag, no digest).
func WithTag(ref, tag string) string {
	last := path.Base(ref)
	if strings.Contains(last, ":") || strings.Contains(ref, "@") {
		return ref
	}
	return ref + ":" + tag
}

// Context writes r and the static box-bridge binary at bridge (as
// BridgeFile) into a new temporary directory: the build context of r's
// Dockerfile. The caller calls cleanup once the build is done.
func (r *Rendered) Context(bridge string) (dir string, cleanup func(), err error) {
	dir, err = os.MkdirTemp("", "boxctl-build-")
	if err != nil {
		return "", nil, err
	}
	cleanup = func() { os.RemoveAll(dir) }
	if err := r.WriteDir(dir); err != nil {
		cleanup()
		return "", nil, err
	}
	if err := treecopy.CopyFile(bridge, filepath.Join(dir, BridgeFile), 0o755); err != nil {
		cleanup()
		return "", nil, fmt.Errorf("bridge binary: %w", err)
	}
	return dir, cleanup, nil
}
