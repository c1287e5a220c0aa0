package boximage

import (
	"cmp"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/tangle-network/boxctl/pins"
)

// Source is what a build installs: the user's own Dockerfile (File, with
// its context), or else the box image rendered from the embedded pins.
type Source struct {
	// File is a Dockerfile of the user's; "" renders one from the pins.
	File string
	// ContextDir is File's build context; default File's directory.
	ContextDir string
	// Harnesses selects the harnesses to install; default the proven set.
	Harnesses []string
	// Base overrides the pinned base image (pins.ParseBase's form).
	Base string
	// Bridge is the static box-bridge binary; default the one for
	// Platform beside the running executable: BridgeName(arch), else
	// BridgeFile.
	Bridge string
	// Platform is the build's platform ("linux/arm64"); default the
	// machine's own architecture. The bridge must be built for it.
	Platform string
}

// SourceError is a Source that cannot be built as given: an unknown
// harness, no proven default set, a malformed base or no bridge binary.
type SourceError struct{ Err error }

func (e *SourceError) Error() string { return e.Err.Error() }
func (e *SourceError) Unwrap() error { return e.Err }

// Prepared is a Source made ready: the Dockerfile, its context directory
// and, for a rendered image, the pins and the harnesses it holds. Close
// removes a rendered context.
type Prepared struct {
	Dockerfile []byte
	ContextDir string
	Pins       *pins.Pins
	Harnesses  []string
	cleanup    func()
}

// Close removes what Prepare made.
func (p *Prepared) Close() {
	if p.cleanup != nil {
		p.cleanup()
	}
}

// Prepare reads s.File, or renders the pins into a new build context
// holding the bridge binary.
func Prepare(s Source) (*Prepared, error) {
	if s.File != "" {
		df, err := os.ReadFile(s.File)
		if err != nil {
			return nil, fmt.Errorf("read --file: %w", err)
		}
		return &Prepared{Dockerfile: df, ContextDir: cmp.Or(s.ContextDir, filepath.Dir(s.File))}, nil
	}
	pp, r, err := RenderSource(s)
	if err != nil {
		return nil, err
	}
	bridge, err := bridgeBinary(s.Bridge, s.Platform, exeDirs())
	if err != nil {
		return nil, err
	}
	dir, cleanup, err := r.Context(bridge)
	if err != nil {
		return nil, err
	}
	p := &Prepared{Dockerfile: r.Dockerfile, ContextDir: dir, Pins: pp, cleanup: cleanup}
	for _, h := range r.Harnesses {
		p.Harnesses = append(p.Harnesses, h.Name)
	}
	return p, nil
}

// RenderSource renders the box image from the embedded pins with
// s.Harnesses and s.Base applied.
func RenderSource(s Source) (*pins.Pins, *Rendered, error) {
	pp, err := pins.Load()
	if err != nil {
		return nil, nil, err
	}
	ropts := RenderOptions{Harnesses: s.Harnesses}
	if s.Base != "" {
		b, err := pins.ParseBase(s.Base)
		if err != nil {
			return nil, nil, &SourceError{fmt.Errorf("--base: %w", err)}
		}
		ropts.Base = &b
	}
	r, err := Render(pp, ropts)
	var unknown *pins.UnknownHarnessError
	switch {
	case errors.As(err, &unknown):
		return nil, nil, &SourceError{fmt.Errorf("--harness %s: %w", unknown.Name, unknown)}
	case errors.Is(err, pins.ErrNoHarness):
		return nil, nil, &SourceError{fmt.Errorf("no harness is proven yet, so there is no default set to install: "+
			"pass --harness NAME[,NAME...] (known: %s), or run the conformance suite to prove one", strings.Join(pp.HarnessNames(), ", "))}
	case err != nil:
		return nil, nil, err
	}
	return pp, r, nil
}
