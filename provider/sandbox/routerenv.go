package sandbox

import "strings"

// The model Router's environment: its base URL and its key.
const (
	RouterURLEnv = "TANGLE_ROUTER_URL"
	RouterKeyEnv = "TANGLE_API_KEY"
)

// MissingRouterEnvError means the environment lacks what RouterFromEnv
// needs.
type MissingRouterEnvError struct {
	// Vars are the unset variables: RouterURLEnv, then RouterKeyEnv.
	Vars []string
}

func (e *MissingRouterEnvError) Error() string {
	return strings.Join(e.Vars, " and ") + " not set"
}

// RouterFromEnv returns the Router at url, or at $TANGLE_ROUTER_URL when
// url is "", with the key from $TANGLE_API_KEY; getenv reads the
// environment (os.Getenv). What is unset or empty is a
// *MissingRouterEnvError. It does not check the URL: CheckRouterURL does.
func RouterFromEnv(url string, getenv func(string) string) (Router, error) {
	r := Router{URL: url, Key: getenv(RouterKeyEnv)}
	var missing []string
	if r.URL == "" {
		if r.URL = getenv(RouterURLEnv); r.URL == "" {
			missing = append(missing, RouterURLEnv)
		}
	}
	if r.Key == "" {
		missing = append(missing, RouterKeyEnv)
	}
	if len(missing) > 0 {
		return Router{}, &MissingRouterEnvError{Vars: missing}
	}
	return r, nil
}
