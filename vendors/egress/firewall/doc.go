// Package firewall installs, changes and reads back the kernel's egress
// rules of one Linux bridge whose machines are confined by an egress
// policy (a Docker network of boxes), through nf_tables from Go
// (github.com/google/nftables: no nft or iptables binary).
//
// Everything lives in one inet table of its own, named for the bridge, so
// that Uninstall removes exactly what Install added and no other chain
// (Docker's included) is touched. Its base chains run just before the
// filter and destination-NAT priorities, and a drop in them is final
// whatever a later chain accepts. For packets that enter from the bridge:
//
//   - prerouting (nat): TCP 80 and 443 and TCP/UDP 53 to the gateway are
//     redirected to the relay's and the resolver's ports on the gateway;
//   - input: IPv6 dropped; replies of connections this machine opened
//     accepted; TCP to the gateway on the relay's, the resolver's and the
//     broker's ports and UDP to the resolver's port accepted; everything
//     else (every other address and port of this machine) dropped;
//   - forward: IPv6 dropped; replies accepted; link-local (169.254.0.0/16,
//     the metadata address among it) dropped; other machines of the
//     bridge dropped; then the per-box chain, where each box's TCP to its
//     allowed addresses and ports is accepted; everything else (UDP, ICMP,
//     any other address) dropped. Connections into the bridge's machines
//     from elsewhere are dropped too, but replies.
//
// One process holds a bridge: Install refuses (*HeldError) a bridge whose
// table a live process other than this one installed. The table outlives
// the process that installed it: boxes stay confined
// (with nothing but the broker reachable) when that process ends. Install
// is idempotent; SetBox replaces one box's rules in one transaction.
package firewall
