package main

import (
	"flag"
	"fmt"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/tarball"

	"github.com/tangle-network/boxctl/internal/testbed/baseimage"
)

// saveImage writes an image around one layer tarball as a `docker save`
// archive, the name recorded as its tag: what `ctr images import` reads.
// The test bed's pause image is made this way.
func saveImage(args []string) error {
	fs := flag.NewFlagSet("save-image", flag.ContinueOnError)
	layer := fs.String("layer", "", "layer tarball (tar or tar.gz)")
	ref := fs.String("ref", "", "image name with tag, e.g. localhost/boxctl/pause:TAG")
	out := fs.String("out", "", "archive to write")
	var entrypoint listFlag
	fs.Var(&entrypoint, "entrypoint", "entrypoint argument (repeatable, in order)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *layer == "" || *ref == "" || *out == "" {
		return fmt.Errorf("save-image needs -layer, -ref and -out: %w", flag.ErrHelp)
	}
	tag, err := name.NewTag(*ref, name.StrictValidation)
	if err != nil {
		return fmt.Errorf("image name %q: %w", *ref, err)
	}
	img, err := baseimage.FromLayer(*layer, baseimage.Config{
		Entrypoint: entrypoint,
		CreatedBy:  "boxctl testbed: " + *ref,
	})
	if err != nil {
		return err
	}
	if err := tarball.WriteToFile(*out, tag, img); err != nil {
		return fmt.Errorf("write %s: %w", *out, err)
	}
	return nil
}
