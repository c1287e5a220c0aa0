package main

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"github.com/tangle-network/boxctl/boximage"
)

// buildOptions are the flags of `boxctl build`.
type buildOptions struct {
	target       string
	push         string
	ecrRepo      string
	ecrRegion    string
	tag          string
	name         string
	harnesses    []string
	buildkitAddr string
	dockerHost   string
	progress     string
	file         string
	contextDir   string
	print        bool
	bridge       string
	base         string
	buildArgs    []string
	platform     string
	cacheFrom    []string
	cacheTo      []string
	insecure     []string
	noCache      bool
	e2bURL       string
	e2bCPU       int
	e2bMemoryMB  int
	daytonaURL   string
}

var buildTargets = []string{boximage.TargetDocker, boximage.TargetRegistry, boximage.TargetE2B, boximage.TargetDaytona}

func newBuildCmd(a *app) *cobra.Command {
	o := &buildOptions{target: boximage.TargetDocker, name: "boxctl-box", progress: boximage.ProgressAuto,
		e2bCPU: 2, e2bMemoryMB: 2048}
	cmd := &cobra.Command{
		Use:   "build",
		Short: "Build the box image with BuildKit and publish it (docker, registry, ECR, E2B, Daytona)",
		Long: `build renders the box image from the embedded pins (or takes --file),
builds it with BuildKit and publishes it to --target:

  docker     load it into the local Docker engine as NAME:TAG
  registry   push it to --push REF (Docker config credentials) or to the
             ECR repository --ecr-repository (AWS default credentials; created
             if missing)
  e2b        push as for registry, then build an E2B template from the image
             (E2B_API_KEY; ECR credentials are passed natively)
  daytona    push to Daytona's registry (or --push / --ecr-repository), then
             create a snapshot and wait until it is active (DAYTONA_API_KEY)

Every target prints the image digest and size; --output json prints a build
record that boxctl conformance reads. BuildKit progress goes to stderr.
--dockerfile prints the rendered Dockerfile and builds nothing.

The image holds the static box-bridge for its platform: --bridge, else
box-bridge-linux-ARCH beside boxctl (as release archives ship it), else
box-bridge there (make build, go install) when it is built for ARCH. ARCH
is --platform's, else this machine's.`,
		Example: `  boxctl build --harness claude,pi
  boxctl build --dockerfile --harness pi
  boxctl build --platform linux/arm64 --harness claude
  boxctl build --target registry --push 127.0.0.1:5000/boxctl/box:dev
  boxctl build --target e2b --ecr-repository boxctl/box -o json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := o.validate(); err != nil {
				return usageError{err}
			}
			if o.print {
				return printDockerfile(a, o)
			}
			return runBuild(cmd.Context(), a, o)
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.target, "target", o.target, "where the image goes: "+strings.Join(buildTargets, ", "))
	f.StringVar(&o.push, "push", "", "registry reference to push to (repository[:tag])")
	f.StringVar(&o.ecrRepo, "ecr-repository", "", "Amazon ECR repository to push to, created if missing")
	f.StringVar(&o.ecrRegion, "ecr-region", "", "AWS region of the ECR repository (default: AWS_REGION)")
	f.StringVar(&o.tag, "tag", "", "image tag (default: derived from the Dockerfile)")
	f.StringVar(&o.name, "name", o.name, "image, template and snapshot name")
	f.StringSliceVar(&o.harnesses, "harness", nil, "harnesses to install, by name or backend (default: the proven ones)")
	f.StringVar(&o.buildkitAddr, "buildkit-addr", "",
		"buildkitd address, unix:///PATH or tcp://HOST:PORT (default: $BUILDKIT_HOST, else "+boximage.DefaultBuildkitAddr+")")
	f.StringVar(&o.dockerHost, "docker-host", "", "Docker engine address (default: DOCKER_HOST)")
	f.StringVar(&o.progress, "progress", o.progress, "BuildKit progress: auto, tty, plain or quiet")
	f.BoolVar(&o.print, "dockerfile", false, "print the rendered Dockerfile and build nothing")
	f.StringVarP(&o.file, "file", "f", "", "build this Dockerfile instead of rendering one from the pins")
	f.StringVar(&o.contextDir, "context", "", "build context for --file (default: its directory)")
	f.StringVar(&o.bridge, "bridge", "", "static box-bridge binary for the platform (default: box-bridge-linux-ARCH, else box-bridge, beside boxctl)")
	f.StringVar(&o.base, "base", "", "base image by digest (reference@sha256:...) instead of the pinned one")
	f.StringArrayVar(&o.buildArgs, "build-arg", nil, "Dockerfile ARG value KEY=VALUE (repeatable)")
	f.StringVar(&o.platform, "platform", "", "target platform, e.g. linux/arm64 (default: buildkitd's; the bridge's: this machine's architecture)")
	f.StringArrayVar(&o.cacheFrom, "cache-from", nil, "registry reference to import build cache from (repeatable)")
	f.StringArrayVar(&o.cacheTo, "cache-to", nil, "registry reference to export build cache to (repeatable)")
	f.StringArrayVar(&o.insecure, "insecure-registry", nil, "registry host spoken to over plain HTTP (repeatable)")
	f.BoolVar(&o.noCache, "no-cache", false, "build every step again")
	f.StringVar(&o.e2bURL, "e2b-api-url", "", "E2B control plane (default: E2B_API_URL, or https://api.$E2B_DOMAIN)")
	f.IntVar(&o.e2bCPU, "e2b-cpu", o.e2bCPU, "vCPUs of sandboxes made from the E2B template")
	f.IntVar(&o.e2bMemoryMB, "e2b-memory-mb", o.e2bMemoryMB, "memory of sandboxes made from the E2B template")
	f.StringVar(&o.daytonaURL, "daytona-api-url", "", "Daytona control plane (default: DAYTONA_API_URL)")
	_ = cmd.RegisterFlagCompletionFunc("target", cobra.FixedCompletions(buildTargets, cobra.ShellCompDirectiveNoFileComp))
	_ = cmd.RegisterFlagCompletionFunc("progress", cobra.FixedCompletions(
		[]string{"auto", "tty", "plain", "quiet"}, cobra.ShellCompDirectiveNoFileComp))
	return cmd
}

func (o *buildOptions) validate() error {
	if !slices.Contains(buildTargets, o.target) {
		return fmt.Errorf("--target %q: want one of %s", o.target, strings.Join(buildTargets, ", "))
	}
	switch o.progress {
	case boximage.ProgressAuto, boximage.ProgressTTY, boximage.ProgressPlain, boximage.ProgressQuiet:
	default:
		return fmt.Errorf("--progress %q: want auto, tty, plain or quiet", o.progress)
	}
	if o.push != "" && o.ecrRepo != "" {
		return errors.New("--push and --ecr-repository exclude each other")
	}
	switch o.target {
	case boximage.TargetDocker:
		if o.push != "" || o.ecrRepo != "" {
			return errors.New("--target docker loads locally: drop --push/--ecr-repository or use --target registry")
		}
	case boximage.TargetRegistry, boximage.TargetE2B:
		if o.push == "" && o.ecrRepo == "" {
			return fmt.Errorf("--target %s needs --push REF or --ecr-repository NAME", o.target)
		}
	}
	if o.contextDir != "" && o.file == "" {
		return errors.New("--context goes with --file")
	}
	if o.file != "" && (len(o.harnesses) > 0 || o.base != "") {
		return errors.New("--harness and --base render the Dockerfile: they exclude --file")
	}
	if o.file != "" && o.print {
		return errors.New("--dockerfile prints the rendered Dockerfile: it excludes --file")
	}
	for _, kv := range o.buildArgs {
		if k, _, ok := strings.Cut(kv, "="); !ok || k == "" {
			return fmt.Errorf("--build-arg %q: want KEY=VALUE", kv)
		}
	}
	if o.tag != "" && (strings.ContainsAny(o.tag, ":/@ ") || o.tag == "latest") {
		return fmt.Errorf("--tag %q: want a plain tag other than latest", o.tag)
	}
	if o.name == "" || strings.ContainsAny(o.name, ":@ ") {
		return fmt.Errorf("--name %q: want a repository-like name without tag", o.name)
	}
	return nil
}
