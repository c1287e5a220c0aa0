package main

import (
	"context"
	"time"

	"github.com/tangle-network/boxctl/boximage"
	"github.com/tangle-network/boxctl/cmd/boxctl/internal/boxstate"
)

// rememberBuild records rec, the image (or template, or snapshot) a
// `boxctl build` just published, in the state file, so that `boxctl up
// --target` of that vendor starts boxes from it by default (a registry's
// image serves Kubernetes). A failure to record is a warning: the build
// itself succeeded.
func rememberBuild(ctx context.Context, a *app, rec boximage.Record) {
	s, err := a.openState()
	if err == nil {
		err = s.Update(ctx, func(st *boxstate.State) error {
			st.LastBuild = &boxstate.LastBuild{Target: rec.Target, Image: rec.Reference, Digest: rec.Digest, Built: time.Now().UTC()}
			return nil
		})
	}
	if err != nil {
		a.log.Warn("the built image is not recorded for `boxctl up`: pass it with --image", "image", rec.Reference, "err", err)
	}
}
