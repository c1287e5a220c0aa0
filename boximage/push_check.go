package boximage

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/remote/transport"
)

// pushCheckTimeout bounds the check that a registry takes a push.
const pushCheckTimeout = 30 * time.Second

var _ pushChecker = (*RegistryExporter)(nil)

// checkPush logs in to the registry with push scope and starts (then
// cancels) a blob upload, as `crane` does: a registry that refuses the
// credentials or the repository answers now, with its own message.
func (e *RegistryExporter) checkPush(ctx context.Context, auth authLookup) error {
	if e.ref == nil {
		return errors.New("push: no reference (make the exporter with NewRegistryExporter)")
	}
	ctx, cancel := context.WithTimeout(ctx, pushCheckTimeout)
	defer cancel()
	repo := e.ref.Context()
	a, err := auth.Resolve(repo)
	if err != nil {
		return fmt.Errorf("push %s: credentials for %s: %w", e.ref, repo.RegistryStr(), err)
	}
	secrets := secretsOf(ctx, a)
	tr, err := transport.NewWithContext(ctx, repo.Registry, a, remote.DefaultTransport,
		[]string{repo.Scope(transport.PushScope)})
	if err != nil {
		return e.newPushError(err, secrets)
	}
	hc := &http.Client{Transport: tr}
	u := url.URL{Scheme: repo.Scheme(), Host: repo.RegistryStr(), Path: "/v2/" + repo.RepositoryStr() + "/blobs/uploads/"}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u.String(), nil)
	if err != nil {
		return fmt.Errorf("push %s: %w", e.ref, err)
	}
	resp, err := hc.Do(req)
	if err != nil {
		return e.newPushError(err, secrets)
	}
	defer resp.Body.Close()
	if err := transport.CheckError(resp, http.StatusCreated, http.StatusAccepted); err != nil {
		return e.newPushError(err, secrets)
	}
	if loc, err := resp.Location(); err == nil {
		// Nothing was uploaded; ending the session frees what it holds.
		if del, err := http.NewRequestWithContext(ctx, http.MethodDelete, loc.String(), nil); err == nil {
			if r, err := hc.Do(del); err == nil {
				r.Body.Close()
			}
		}
	}
	return nil
}

// pushError turns a failed export into a *PushError when BuildKit's error
// says the push failed ("failed to push REF: ..."); other errors pass.
func (e *RegistryExporter) pushError(ctx context.Context, err error, auth authLookup) error {
	if e.ref == nil || !strings.Contains(err.Error(), "failed to push") {
		return err
	}
	var secrets []string
	if a, rerr := auth.Resolve(e.ref.Context()); rerr == nil {
		secrets = secretsOf(ctx, a)
	}
	return fmt.Errorf("build: %w", e.newPushError(err, secrets))
}

var (
	pushReasonRE = regexp.MustCompile(`failed to push [^ ]+: (.*)$`)
	statusRE     = regexp.MustCompile(`\b([45][0-9][0-9]) [A-Z][A-Za-z ]*$`)
)

// newPushError describes err, from go-containerregistry or from BuildKit,
// with every secret redacted.
func (e *RegistryExporter) newPushError(err error, secrets []string) *PushError {
	pe := &PushError{Reference: e.ref.Name(), Registry: e.ref.Context().RegistryStr(), Err: err}
	var te *transport.Error
	switch {
	case errors.As(err, &te):
		pe.Status = te.StatusCode
		var msgs []string
		for _, d := range te.Errors {
			msgs = append(msgs, d.String())
		}
		pe.Message = strings.Join(msgs, "; ")
		if pe.Message == "" {
			pe.Message = http.StatusText(te.StatusCode)
		}
	default:
		pe.Message = err.Error()
		if m := pushReasonRE.FindStringSubmatch(pe.Message); m != nil {
			pe.Message = m[1]
		}
		if m := statusRE.FindStringSubmatch(pe.Message); m != nil {
			pe.Status, _ = strconv.Atoi(m[1])
		}
	}
	pe.Message = redact(pe.Message, secrets...)
	return pe
}

// secretsOf lists what a login could leak: the password, tokens and the
// base64 user:password of Basic auth.
func secretsOf(ctx context.Context, a authn.Authenticator) []string {
	cfg, err := authn.Authorization(ctx, a)
	if err != nil || cfg == nil {
		return nil
	}
	out := []string{cfg.Password, cfg.IdentityToken, cfg.RegistryToken, cfg.Auth}
	if cfg.Username != "" || cfg.Password != "" {
		out = append(out, base64.StdEncoding.EncodeToString([]byte(cfg.Username+":"+cfg.Password)))
	}
	return out
}
