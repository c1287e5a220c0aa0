package boximage

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/ecr"
	ecrtypes "github.com/aws/aws-sdk-go-v2/service/ecr/types"
)

// ECR resolves Amazon ECR repositories and logs in to them through the AWS
// SDK, with credentials from the default chain (environment, shared
// config, SSO, instance role).
type ECR struct {
	client *ecr.Client
	cfg    aws.Config
}

// ECROption configures NewECR.
type ECROption func(*ecrOptions)

type ecrOptions struct {
	region   string
	endpoint string
}

// WithECRRegion sets the region. Default: the SDK's (AWS_REGION, profile).
func WithECRRegion(r string) ECROption { return func(o *ecrOptions) { o.region = r } }

// WithECREndpoint sets the ECR API endpoint. Default: the SDK's, which
// honours AWS_ENDPOINT_URL_ECR and AWS_ENDPOINT_URL.
func WithECREndpoint(u string) ECROption { return func(o *ecrOptions) { o.endpoint = u } }

// NewECR loads the default AWS configuration.
func NewECR(ctx context.Context, opts ...ECROption) (*ECR, error) {
	var o ecrOptions
	for _, opt := range opts {
		opt(&o)
	}
	var lo []func(*config.LoadOptions) error
	if o.region != "" {
		lo = append(lo, config.WithRegion(o.region))
	}
	cfg, err := config.LoadDefaultConfig(ctx, lo...)
	if err != nil {
		return nil, fmt.Errorf("load AWS config: %w", err)
	}
	if cfg.Region == "" {
		return nil, errors.New("ECR: no AWS region (set AWS_REGION or --ecr-region)")
	}
	c := ecr.NewFromConfig(cfg, func(eo *ecr.Options) {
		if o.endpoint != "" {
			eo.BaseEndpoint = aws.String(o.endpoint)
		}
	})
	return &ECR{client: c, cfg: cfg}, nil
}

// Region returns the region in use.
func (e *ECR) Region() string { return e.cfg.Region }

// ECRRepository is an ECR repository ready to push to.
type ECRRepository struct {
	// Name is the repository name.
	Name string
	// URI is registry-host/name, the reference to push to (add a tag).
	URI string
	// Created reports that Ensure created the repository.
	Created bool
	// Auth logs in to the repository's registry.
	Auth RegistryAuth
}

// Registry returns the host of the repository's registry.
func (r ECRRepository) Registry() string {
	host, _, _ := strings.Cut(r.URI, "/")
	return host
}

// Ensure returns the repository, creating it if it is missing, with a
// fresh login to its registry.
func (e *ECR) Ensure(ctx context.Context, name string) (ECRRepository, error) {
	if name == "" {
		return ECRRepository{}, errors.New("ECR: repository name is empty")
	}
	repo := ECRRepository{Name: name}
	var registryID *string
	out, err := e.client.DescribeRepositories(ctx, &ecr.DescribeRepositoriesInput{RepositoryNames: []string{name}})
	var nf *ecrtypes.RepositoryNotFoundException
	switch {
	case errors.As(err, &nf):
		created, err := e.client.CreateRepository(ctx, &ecr.CreateRepositoryInput{
			RepositoryName:     aws.String(name),
			ImageTagMutability: ecrtypes.ImageTagMutabilityMutable,
		})
		var exists *ecrtypes.RepositoryAlreadyExistsException
		if errors.As(err, &exists) { // created meanwhile by someone else
			return e.Ensure(ctx, name)
		}
		if err != nil {
			return ECRRepository{}, fmt.Errorf("create ECR repository %s: %w", name, err)
		}
		if created.Repository == nil || created.Repository.RepositoryUri == nil {
			return ECRRepository{}, fmt.Errorf("create ECR repository %s: response lacks repositoryUri", name)
		}
		repo.URI, repo.Created, registryID = *created.Repository.RepositoryUri, true, created.Repository.RegistryId
	case err != nil:
		return ECRRepository{}, fmt.Errorf("describe ECR repository %s: %w", name, err)
	default:
		if len(out.Repositories) != 1 || out.Repositories[0].RepositoryUri == nil {
			return ECRRepository{}, fmt.Errorf("describe ECR repository %s: want one repository with a URI, got %d", name, len(out.Repositories))
		}
		repo.URI, registryID = *out.Repositories[0].RepositoryUri, out.Repositories[0].RegistryId
	}
	if repo.Auth, err = e.login(ctx, registryID); err != nil {
		return ECRRepository{}, err
	}
	return repo, nil
}

// login exchanges the AWS credentials for a registry login.
func (e *ECR) login(ctx context.Context, registryID *string) (RegistryAuth, error) {
	in := &ecr.GetAuthorizationTokenInput{}
	if registryID != nil {
		in.RegistryIds = []string{*registryID} //nolint:staticcheck // still honoured by ECR
	}
	out, err := e.client.GetAuthorizationToken(ctx, in)
	if err != nil {
		return RegistryAuth{}, fmt.Errorf("ECR authorization token: %w", err)
	}
	if len(out.AuthorizationData) == 0 || out.AuthorizationData[0].AuthorizationToken == nil {
		return RegistryAuth{}, errors.New("ECR authorization token: empty response")
	}
	raw, err := base64.StdEncoding.DecodeString(*out.AuthorizationData[0].AuthorizationToken)
	if err != nil {
		return RegistryAuth{}, fmt.Errorf("ECR authorization token: %w", err)
	}
	user, pass, ok := strings.Cut(string(raw), ":")
	if !ok || user == "" || pass == "" {
		return RegistryAuth{}, errors.New("ECR authorization token: not user:password")
	}
	return RegistryAuth{Username: user, Password: pass}, nil
}

// AccessKeys returns the static AWS keys in use, for a service (such as
// E2B) that pulls from ECR with its own AWS login.
func (e *ECR) AccessKeys(ctx context.Context) (id, secret string, err error) {
	c, err := e.cfg.Credentials.Retrieve(ctx)
	if err != nil {
		return "", "", fmt.Errorf("AWS credentials: %w", err)
	}
	if c.SessionToken != "" {
		return "", "", errors.New("AWS credentials are temporary (session token): E2B needs long-lived access keys")
	}
	return c.AccessKeyID, c.SecretAccessKey, nil
}
