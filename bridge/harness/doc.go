// Package harness defines how the bridge drives a coding-agent CLI: an
// Adapter builds the command and environment of one turn and makes a
// Parser that turns the CLI's output lines into harness-neutral Events.
// Adapters live in subpackages named after the harness (claude, ...); the
// run engine owns processes, deadlines and storage, so an adapter is pure:
// it starts nothing and keeps no state beyond one Parser per turn.
//
// A Parser is used by one goroutine; Adapters are safe for concurrent use.
package harness
