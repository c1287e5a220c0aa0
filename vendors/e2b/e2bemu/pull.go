package e2bemu

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/ecr"
	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/remote"
)

// authFor turns fromImageRegistry into a registry login: basic credentials
// as given, or for "aws" an ECR authorization token fetched with the AWS
// keys, as E2B does.
func (s *Server) authFor(ctx context.Context, reg *registry) (authn.Authenticator, error) {
	switch {
	case reg == nil:
		return authn.Anonymous, nil
	case reg.Type == "registry":
		return &authn.Basic{Username: reg.Username, Password: reg.Password}, nil
	case reg.Type == "aws":
		if s.opts.ECREndpoint == "" {
			return nil, errors.New("no ECR endpoint configured")
		}
		c := ecr.New(ecr.Options{
			Region:       reg.AWSRegion,
			BaseEndpoint: aws.String(s.opts.ECREndpoint),
			Credentials:  credentials.NewStaticCredentialsProvider(reg.AWSAccessKeyID, reg.AWSSecretAccessKey, ""),
		})
		out, err := c.GetAuthorizationToken(ctx, &ecr.GetAuthorizationTokenInput{})
		if err != nil {
			return nil, fmt.Errorf("ECR authorization: %w", err)
		}
		if len(out.AuthorizationData) == 0 || out.AuthorizationData[0].AuthorizationToken == nil {
			return nil, errors.New("ECR authorization: no token")
		}
		raw, err := base64.StdEncoding.DecodeString(*out.AuthorizationData[0].AuthorizationToken)
		if err != nil {
			return nil, fmt.Errorf("ECR authorization: %w", err)
		}
		user, pass, ok := strings.Cut(string(raw), ":")
		if !ok {
			return nil, errors.New("ECR authorization: malformed token")
		}
		return &authn.Basic{Username: user, Password: pass}, nil
	default:
		return nil, fmt.Errorf("registry type %q is not supported here", reg.Type)
	}
}

// pullImage fetches the image's manifest, config and every layer, verifying
// digests, and reports progress through logf.
func pullImage(ctx context.Context, image string, auth authn.Authenticator, logf func(string)) error {
	ref, err := name.ParseReference(image)
	if err != nil {
		return err
	}
	img, err := remote.Image(ref, remote.WithContext(ctx), remote.WithAuth(auth))
	if err != nil {
		return err
	}
	digest, err := img.Digest()
	if err != nil {
		return err
	}
	if _, err := img.ConfigFile(); err != nil {
		return fmt.Errorf("config: %w", err)
	}
	layers, err := img.Layers()
	if err != nil {
		return err
	}
	logf(fmt.Sprintf("Resolved %s to %s (%d layers)", image, digest, len(layers)))
	for i, l := range layers {
		d, err := l.Digest()
		if err != nil {
			return err
		}
		rc, err := l.Compressed()
		if err != nil {
			return fmt.Errorf("layer %s: %w", d, err)
		}
		n, err := io.Copy(io.Discard, rc)
		rc.Close()
		if err != nil {
			return fmt.Errorf("layer %s: %w", d, err)
		}
		logf(fmt.Sprintf("Pulled layer %d/%d %s (%d bytes)", i+1, len(layers), d, n))
	}
	return nil
}
