package provider

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"strings"
)

const (
	environmentIDPrefix = "cb1."
	maxEnvironmentID    = 512
)

// route is what an environment id carries: the harness, the exact model
// route and the digest of the create request.
type route struct {
	Backend      string
	Model        string
	CreateDigest string
}

// environmentID encodes the route into a provider-owned id, so Get needs
// no cache. The nonce is derived from the idempotency key (stable across
// processes) or random.
func environmentID(r route, idempotencyKey string) (string, error) {
	if !validRoute(r) {
		return "", errors.New("cli-bridge environment route is invalid")
	}
	var nonce string
	if idempotencyKey != "" {
		sum := sha256.Sum256([]byte(idempotencyKey))
		nonce = base64.RawURLEncoding.EncodeToString(sum[:])
	} else {
		nonce = rand.Text()
	}
	payload, err := json.Marshal([]any{nullable(r.Backend), nullable(r.Model), r.CreateDigest, nonce})
	if err != nil {
		return "", err
	}
	id := environmentIDPrefix + base64.RawURLEncoding.EncodeToString(payload)
	if len(id) > maxEnvironmentID {
		return "", errors.New("cli-bridge route is too long to retain in an environment id")
	}
	return id, nil
}

// parseEnvironmentID recovers the route of a provider-owned id.
func parseEnvironmentID(id string) (route, error) {
	bad := errors.New("cli-bridge environment id has invalid retained route data")
	if id == "" || strings.TrimSpace(id) != id {
		return route{}, errors.New("cli-bridge environment id must be non-empty and have no outer whitespace")
	}
	if !strings.HasPrefix(id, environmentIDPrefix) {
		return route{}, errors.New("cli-bridge environment id is not a provider-owned retained identity")
	}
	if len(id) > maxEnvironmentID {
		return route{}, bad
	}
	enc := id[len(environmentIDPrefix):]
	raw, err := base64.RawURLEncoding.DecodeString(enc)
	if err != nil || base64.RawURLEncoding.EncodeToString(raw) != enc {
		return route{}, bad
	}
	var parts []*string
	if err := json.Unmarshal(raw, &parts); err != nil || len(parts) != 4 || parts[2] == nil || parts[3] == nil {
		return route{}, bad
	}
	r := route{CreateDigest: *parts[2]}
	if parts[0] != nil {
		if *parts[0] == "" {
			return route{}, bad
		}
		r.Backend = *parts[0]
	}
	if parts[1] != nil {
		if *parts[1] == "" {
			return route{}, bad
		}
		r.Model = *parts[1]
	}
	if n := len(*parts[3]); n == 0 || n > 64 || !validRoute(r) {
		return route{}, bad
	}
	return r, nil
}

func validRoute(r route) bool {
	for _, v := range []string{r.Backend, r.Model} {
		if len(v) > maxEnvironmentID || strings.TrimSpace(v) != v {
			return false
		}
	}
	if !digestPattern.MatchString(r.CreateDigest) {
		return false
	}
	if r.Model == "" {
		return r.Backend == ""
	}
	return r.Backend == "" || r.Model == r.Backend || strings.HasPrefix(r.Model, r.Backend+"/")
}

func nullable(s string) any {
	if s == "" {
		return nil
	}
	return s
}
