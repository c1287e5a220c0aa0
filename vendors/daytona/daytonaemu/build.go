package daytonaemu

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"

	"github.com/tangle-network/boxctl/boximage"
)

// Declarative builds: a sandbox created from an image or a Dockerfile
// (buildInfo.dockerfileContent) is built with BuildKit (by default the
// engine's own) into the engine, as a runner builds a snapshot, once per
// Dockerfile. The emulator adds
// box-init as the entrypoint, so the sandbox ends at its deadline like
// every other.

// Sandbox states of a declarative build.
const (
	statePendingBuild     = "pending_build"
	stateBuildingSnapshot = "building_snapshot"
	stateBuildFailed      = "build_failed"
)

// buildTag is the engine's tag of the image built from a Dockerfile.
func buildTag(dockerfile string) string {
	sum := sha256.Sum256([]byte(dockerfile))
	return "daytona-emulator-build:" + hex.EncodeToString(sum[:12])
}

// buildImage builds dockerfile (once per content) and returns the
// engine's reference of the image.
func (s *Server) buildImage(ctx context.Context, dockerfile string) (string, error) {
	tag := buildTag(dockerfile)
	s.buildMu.Lock()
	defer s.buildMu.Unlock()
	if _, err := s.engine.ImageInspect(ctx, tag); err == nil {
		return tag, nil
	}
	dir, err := os.MkdirTemp("", "daytonaemu-build-")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(dir)
	if err := os.WriteFile(filepath.Join(dir, boximage.InitFile), boximage.InitScript(), 0o755); err != nil {
		return "", err
	}
	df := dockerfile + fmt.Sprintf("\nCOPY --chmod=0755 %s /usr/local/bin/%s\nENTRYPOINT [\"/usr/local/bin/%s\"]\nCMD [\"sleep\", \"infinity\"]\n",
		boximage.InitFile, boximage.InitFile, boximage.InitFile)
	exp, err := boximage.NewDockerExporter(s.engine, tag)
	if err != nil {
		return "", err
	}
	if _, err := boximage.Build(ctx, boximage.BuildOptions{BuildkitAddr: s.opts.BuildkitAddr, Dockerfile: []byte(df),
		ContextDir: dir, ProgressMode: boximage.ProgressQuiet, Log: s.opts.Log}, exp); err != nil {
		return "", err
	}
	return tag, nil
}
