// Package egress holds the one egress policy of a box, the same on every
// vendor: deny by default, an allow list of domains (exact and
// "*.suffix"), IPs and CIDRs with optional ports, or Open for a box that
// may reach anything. The credential broker is always reachable and is
// never listed.
//
// A domain rule is enforced by name: a relay outside the box matches the
// TLS SNI or HTTP Host of the box's connection on ports 80 and 443 and
// connects to the address it resolved itself, and the box's resolver
// answers only allowed names. An IP or CIDR rule is enforced by address,
// for TCP only. IPv6, UDP (but the box's own resolver) and ICMP are never
// allowed under a policy that is not Open.
//
// This package is pure data: parsing, validation, rendering and matching.
// Enforcement lives with each vendor (vendors/egress/firewall,
// vendors/egress/relay and the vendor's own package).
package egress
