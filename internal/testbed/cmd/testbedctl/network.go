package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/netip"
	"path/filepath"
	"slices"
	"strings"
)

// routeTypes are the words `ip route` may print before a route's
// destination.
var routeTypes = []string{"unicast", "unreachable", "blackhole", "prohibit", "throw", "local", "broadcast", "anycast", "multicast", "nat"}

// podSubnetCheck fails when a route of `ip -4 route show` (on stdin) other
// than the default one and those through the pods' own bridge covers an
// address of the pod subnet: Docker's networks, say.
func podSubnetCheck(args []string, stdin io.Reader) error {
	fs := flag.NewFlagSet("pod-subnet-check", flag.ContinueOnError)
	subnet := fs.String("subnet", "", "the pod subnet")
	bridge := fs.String("bridge", "", "the pods' bridge, whose routes do not count")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *subnet == "" || *bridge == "" {
		return fmt.Errorf("pod-subnet-check needs -subnet and -bridge: %w", flag.ErrHelp)
	}
	pods, err := netip.ParsePrefix(*subnet)
	if err != nil {
		return fmt.Errorf("pod subnet: %w", err)
	}
	sc := bufio.NewScanner(stdin)
	for sc.Scan() {
		line := sc.Text()
		f := strings.Fields(line)
		if len(f) > 1 && slices.Contains(routeTypes, f[0]) {
			f = f[1:]
		}
		if len(f) == 0 || f[0] == "default" {
			continue
		}
		if i := slices.Index(f, "dev"); i >= 0 && i+1 < len(f) && f[i+1] == *bridge {
			continue
		}
		dst, err := parseDst(f[0])
		if err != nil {
			return fmt.Errorf("route %q: %w", line, err)
		}
		if dst.Overlaps(pods) {
			return fmt.Errorf("the pod subnet %s overlaps the route %q", pods, strings.TrimSpace(line))
		}
	}
	return sc.Err()
}

// parseDst reads a route's destination: an address (a /32) or a prefix.
func parseDst(s string) (netip.Prefix, error) {
	if strings.Contains(s, "/") {
		return netip.ParsePrefix(s)
	}
	a, err := netip.ParseAddr(s)
	if err != nil {
		return netip.Prefix{}, err
	}
	return netip.PrefixFrom(a, a.BitLen()), nil
}

// cniConf writes the pods' CNI configuration into -dir: a bridge network
// with host-local addresses from the pod subnet and no masquerade, and the
// loopback network. Files are rewritten only when their content changes.
func cniConf(args []string) error {
	fs := flag.NewFlagSet("cni-conf", flag.ContinueOnError)
	dir := fs.String("dir", "", "the CNI configuration directory")
	network := fs.String("network", "", "the network's name")
	bridge := fs.String("bridge", "", "the bridge's name")
	subnet := fs.String("subnet", "", "the pod subnet")
	ipam := fs.String("ipam-dir", "", "host-local's data directory")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *dir == "" || *network == "" || *bridge == "" || *subnet == "" || *ipam == "" {
		return fmt.Errorf("cni-conf needs -dir, -network, -bridge, -subnet and -ipam-dir: %w", flag.ErrHelp)
	}
	if _, err := netip.ParsePrefix(*subnet); err != nil {
		return fmt.Errorf("pod subnet: %w", err)
	}
	conflist, err := renderConflist(*network, *bridge, *subnet, *ipam)
	if err != nil {
		return err
	}
	if err := writeIfChanged(filepath.Join(*dir, "10-"+*network+".conflist"), conflist, 0o644); err != nil {
		return err
	}
	// The CRI plugin brings up each pod's lo itself (with the loopback
	// plugin); this file says so for readers of the directory.
	return writeIfChanged(filepath.Join(*dir, "99-loopback.conf"), []byte(`{ "cniVersion": "1.0.0", "name": "lo", "type": "loopback" }`+"\n"), 0o644)
}

// renderConflist is the bridge network's conflist: the bridge, and IPv6
// off in each pod (the cluster is IPv4 only, and so is its NetworkPolicy
// enforcer).
func renderConflist(network, bridge, subnet, ipam string) ([]byte, error) {
	q := func(s string) string {
		b, _ := json.Marshal(s)
		return string(b)
	}
	var b bytes.Buffer
	fmt.Fprintf(&b, `{
  "cniVersion": "1.0.0",
  "name": %s,
  "plugins": [
    {
      "type": "bridge",
      "bridge": %s,
      "isGateway": true,
      "ipMasq": false,
      "hairpinMode": true,
      "ipam": {
        "type": "host-local",
        "ranges": [[{ "subnet": %s }]],
        "routes": [{ "dst": "0.0.0.0/0" }],
        "dataDir": %s
      }
    },
    {
      "type": "tuning",
      "sysctl": {
        "net.ipv6.conf.all.disable_ipv6": "1",
        "net.ipv6.conf.default.disable_ipv6": "1"
      }
    }
  ]
}
`, q(network), q(bridge), q(subnet), q(ipam))
	if !json.Valid(b.Bytes()) {
		return nil, fmt.Errorf("rendered an invalid conflist for %s", network)
	}
	return b.Bytes(), nil
}
