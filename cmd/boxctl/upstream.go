package main

import (
	"crypto/sha256"
	"encoding/hex"
	"sort"
	"strings"

	"github.com/tangle-network/boxctl/provider/sandbox/broker"
)

// The providers' key variables, read for --upstream anthropic, openai and
// gemini.
var providerKeyEnv = map[string]string{
	broker.Anthropic: "ANTHROPIC_API_KEY",
	broker.OpenAI:    "OPENAI_API_KEY",
	broker.Gemini:    "GEMINI_API_KEY",
}

// harnessProvider is the provider whose API a harness speaks natively:
// its upstream when only provider keys are set.
var harnessProvider = map[string]string{
	"claude-code": broker.Anthropic,
	"codex":       broker.OpenAI,
	"gemini":      broker.Gemini,
}

// upstreamName names an upstream at the user's broker: the provider's
// name for its public API, with a digest of the URL for any other base
// (a Router, a proxy), so that boxes of different endpoints never share
// one.
func upstreamName(kind, url string, public bool) string {
	if public {
		return kind
	}
	sum := sha256.Sum256([]byte(url))
	return kind + "-" + hex.EncodeToString(sum[:4])
}

// pickUpstream is the upstream kind of a box of harness: upstream when
// given; else the Router when router or its environment is set; else the
// provider whose key is set (the harness's own when several are).
func pickUpstream(upstream, router, harness string, getenv func(string) string) (string, error) {
	switch {
	case upstream != "":
		if upstream != broker.Router && providerKeyEnv[upstream] == "" {
			return "", usageErrorf("--upstream %q: want router, anthropic, openai or gemini", upstream)
		}
		return upstream, nil
	case router != "" || getenv(routerURLEnv) != "" || getenv(routerKeyVar) != "":
		return broker.Router, nil
	}
	var set []string
	for p, env := range providerKeyEnv {
		if getenv(env) != "" {
			set = append(set, p)
		}
	}
	sort.Strings(set)
	own := harnessProvider[harness]
	switch {
	case len(set) == 0:
		return broker.Router, nil // routerFromFlag says what to set
	case own != "" && contains(set, own):
		return own, nil
	case len(set) == 1 && own == "":
		return set[0], nil
	}
	return "", usageErrorf("several provider keys are set (%s) and %s speaks none of them natively: pass --upstream", strings.Join(set, ", "), harness)
}

// providerUpstream is the upstream of provider kind with its key from the
// environment, at base ("" for its public API).
func providerUpstream(kind, base string, getenv func(string) string) (broker.Upstream, error) {
	env := providerKeyEnv[kind]
	key := getenv(env)
	if key == "" {
		return broker.Upstream{}, usageErrorf("--upstream %s: $%s is not set", kind, env)
	}
	u, err := broker.ForProvider(kind, base, key)
	if err != nil {
		return broker.Upstream{}, usageError{err}
	}
	u.Name = upstreamName(kind, u.URL, base == "")
	return u, nil
}

// upstreamFromEnv is the upstream of a box's recorded name as the
// environment gives it again (its key may have changed): a provider's
// public API, or the Router of $TANGLE_ROUTER_URL when the name is its
// own. ok is false when the environment does not give it.
func upstreamFromEnv(name string, getenv func(string) string) (broker.Upstream, bool) {
	if _, isProvider := providerKeyEnv[name]; isProvider {
		u, err := providerUpstream(name, "", getenv)
		return u, err == nil
	}
	url, key := getenv(routerURLEnv), getenv(routerKeyVar)
	if url == "" || key == "" || upstreamName(broker.Router, url, false) != name {
		return broker.Upstream{}, false
	}
	return broker.Upstream{Name: name, URL: url, Key: key, Auth: broker.AuthAsPresented}, true
}
