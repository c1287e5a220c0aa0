// Package relay is the only way out of a confined box: a TCP relay for
// HTTP (port 80) and TLS (port 443) and a DNS server, both outside the
// box, both answering by the box's policy, which they find by the
// connection's source address (the kernel's rules keep a box from
// sending from any other).
//
// The relay reads the HTTP Host or the TLS SNI of a connection (it never
// terminates TLS), checks it against the box's policy, resolves the name
// itself and connects to the address it resolved (never a loopback,
// link-local, multicast or unspecified one), then copies bytes both
// ways. A box that forges its SNI or Host, or resolves the allowed name
// to another address, reaches nothing but what the allowed name resolves
// to. The DNS server answers A queries for allowed names with the
// relay's address, AAAA with no address, and everything else with
// NXDOMAIN (a disallowed name) or REFUSED (another type): it never asks
// anyone else, so no query leaves the machine.
//
// Policies are read on each connection and query; Revoke closes a box's
// relayed connections its policy no longer allows.
package relay
