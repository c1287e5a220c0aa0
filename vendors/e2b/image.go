package e2b

import (
	"context"
	"errors"
	"fmt"
	"math"

	"github.com/tangle-network/boxctl/vendors"
)

// ImportImage publishes a pushed box image as an E2B template: it creates
// the template (named req.Name, with the CPUs and memory of
// req.Resources), builds it from req.Image with the pull credentials (AWS
// keys are passed natively, for ECR) and waits for the build, streaming
// its log to req.Progress. The result's Reference is the template ID that
// CreateSpec.Image takes.
func (v *Vendor) ImportImage(ctx context.Context, req vendors.ImportRequest) (vendors.ImportedImage, error) {
	if req.Image == "" || req.Name == "" {
		return vendors.ImportedImage{}, errors.New("e2b: import image: image and name are required")
	}
	tr := TemplateRequest{Name: req.Name, CPUCount: int(math.Ceil(req.Resources.CPUs)), MemoryMB: int(req.Resources.MemoryBytes >> 20)}
	start := BuildStart{FromImage: req.Image, FromImageRegistry: registryOf(req.Pull)}
	onLog := func(LogEntry) {}
	if req.Progress != nil {
		onLog = func(e LogEntry) { req.Progress(e.Message) }
	}
	ref, err := v.BuildFromImage(ctx, tr, start, onLog)
	out := vendors.ImportedImage{Reference: ref.TemplateID, Kind: "template"}
	if err != nil {
		if ref.TemplateID != "" {
			err = fmt.Errorf("e2b template %s: %w", ref.TemplateID, err)
		}
		return out, err
	}
	return out, nil
}

// registryOf turns pull credentials into fromImageRegistry: "aws" for AWS
// keys, "registry" for a login, none for a public image.
func registryOf(c vendors.RegistryCredentials) *Registry {
	switch {
	case c.AWSAccessKeyID != "":
		return &Registry{Type: "aws", AWSAccessKeyID: c.AWSAccessKeyID, AWSSecretAccessKey: c.AWSSecretAccessKey, AWSRegion: c.AWSRegion}
	case c.Username != "":
		return &Registry{Type: "registry", Username: c.Username, Password: c.Password}
	}
	return nil
}
