// Package bridge assembles the bridge server that runs inside every box:
// configuration from the environment and flags (Config), and Serve, which
// opens the durable store, recovers runs a previous incarnation left live,
// and serves the wire protocol until its context ends.
//
// The parts live in subpackages: wire (the protocol's JSON types, shared
// with clients), store (the durable event log), harness and its adapters
// (how each CLI is driven), jail (the bubblewrap confinement a turn's
// execution asks for), engine (processes and runs) and server (HTTP).
package bridge
