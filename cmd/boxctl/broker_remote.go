package main

import (
	"net"
	"net/url"
	"os"

	"github.com/tangle-network/boxctl/internal/brokertls"
	"github.com/tangle-network/boxctl/provider/sandbox"
	"github.com/tangle-network/boxctl/provider/sandbox/broker"
)

// The environment of a caller whose broker runs elsewhere (a cluster's,
// behind boxctl broker manifest): its admin API's URL and the client
// directory of boxctl broker certs.
const (
	brokerAdminEnv = "BOXCTL_BROKER_ADMIN"
	brokerCertsEnv = "BOXCTL_BROKER_CERTS"
)

// envUpstreams are the upstreams whose keys getenv gives, named as up
// names them: the Router of TANGLE_ROUTER_URL, each provider's public API.
func envUpstreams(getenv func(string) string) []broker.Upstream {
	var out []broker.Upstream
	if url, key := getenv(routerURLEnv), getenv(routerKeyVar); url != "" && key != "" {
		out = append(out, broker.Upstream{Name: upstreamName(broker.Router, url, false), URL: url, Key: key, Auth: broker.AuthAsPresented})
	}
	for _, kind := range []string{broker.Anthropic, broker.OpenAI, broker.Gemini} {
		if u, err := providerUpstream(kind, "", getenv); err == nil {
			out = append(out, u)
		}
	}
	return out
}

// remoteBroker is a client of the broker $BOXCTL_BROKER_ADMIN names, nil
// when it is not set.
func remoteBroker(getenv func(string) string) (*broker.Client, error) {
	addr := getenv(brokerAdminEnv)
	if addr == "" {
		return nil, nil
	}
	dir := getenv(brokerCertsEnv)
	if dir == "" {
		return nil, usageErrorf("$%s is set, $%s is not: name the client directory of boxctl broker certs", brokerAdminEnv, brokerCertsEnv)
	}
	conf, err := brokertls.ClientConfig(dir)
	if err != nil {
		return nil, usageErrorf("$%s: %v", brokerCertsEnv, err)
	}
	c, err := broker.DialTLS(addr, conf)
	if err != nil {
		return nil, usageErrorf("$%s: %v", brokerAdminEnv, err)
	}
	return c, nil
}

// remoteBroker is the app's one client of the cluster's broker
// (remoteBroker of the environment), nil for none.
func (a *app) remoteBroker() (*broker.Client, error) {
	if a.remote == nil {
		c, err := remoteBroker(os.Getenv)
		if err != nil || c == nil {
			return nil, err
		}
		a.remote = c
	}
	return a.remote, nil
}

// checkBrokerURL refuses a --broker-url that is not http(s), carries
// credentials, or is plain http to anything but loopback.
func checkBrokerURL(raw string) error {
	if err := sandbox.CheckRouterURL(raw); err != nil {
		return usageErrorf("--broker-url: %v", err)
	}
	u, _ := url.Parse(raw)
	if ip := net.ParseIP(u.Hostname()); u.Scheme == "http" && (ip == nil || !ip.IsLoopback()) && u.Hostname() != "localhost" {
		return usageErrorf("--broker-url %s: boxes reach a broker off this machine over https only", raw)
	}
	return nil
}
