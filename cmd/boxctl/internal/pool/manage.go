package pool

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"slices"
	"strings"

	"github.com/tangle-network/boxctl/vendors"
	"github.com/tangle-network/boxctl/vendors/reaper"
)

// DefaultName is the name of the pool of target's boxes of harness from
// image under runtime ("" for the vendor's default): the pool `boxctl up`
// claims from.
func DefaultName(target, harness, image, runtime string) string {
	sum := sha256.Sum256([]byte(image))
	name := target + "-" + harness + "-" + hex.EncodeToString(sum[:4])
	if runtime != "" {
		name += "-" + runtime
	}
	return strings.ToLower(name)
}

// ConfinedSuffix ends the name of a pool whose boxes wait with their
// egress denied (sandbox.Options.Egress): a confined claim takes from it,
// an open one from the pool of the same name without it.
const ConfinedSuffix = "-deny"

// Names lists the pools with a file in dir ("" for DefaultDir).
func Names(dir string) ([]string, error) {
	if dir == "" {
		d, err := DefaultDir()
		if err != nil {
			return nil, err
		}
		dir = d
	}
	ents, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []string
	for _, e := range ents {
		if name, ok := strings.CutSuffix(e.Name(), ".json"); ok && Name.MatchString(name) {
			out = append(out, name)
		}
	}
	slices.Sort(out)
	return out, nil
}

// Summarize reads the pool name in dir.
func Summarize(dir, name string) (Summary, error) {
	boxes, err := List(dir, name)
	s := Summary{Name: name, Keepers: []string{}}
	for _, b := range boxes {
		if reaper.OwnerGone(b.Keeper) {
			s.Orphaned++
			continue
		}
		s.Ready++
		if !slices.Contains(s.Keepers, b.Keeper) {
			s.Keepers = append(s.Keepers, b.Keeper)
		}
	}
	return s, err
}

// Drain takes every box of the pool name in dir out of it and destroys
// it on v; it returns how many it destroyed. A keeper still running
// boots new ones.
func Drain(ctx context.Context, v vendors.Vendor, dir, name string) (int, error) {
	reg, err := newRegistry(dir, name)
	if err != nil {
		return 0, err
	}
	var taken []string
	if err := reg.update(ctx, func(f *poolFile) error {
		for _, b := range f.Boxes {
			taken = append(taken, b.BoxID)
		}
		f.Boxes = nil
		return nil
	}); err != nil {
		return 0, err
	}
	var errs []error
	n := 0
	for _, id := range taken {
		box, err := v.Connect(ctx, id)
		if errors.Is(err, vendors.ErrNotFound) {
			continue
		}
		if err == nil {
			err = box.Destroy(ctx)
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("box %s: %w", id, err))
			continue
		}
		n++
	}
	return n, errors.Join(errs...)
}
