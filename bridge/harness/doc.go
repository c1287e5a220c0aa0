// Package harness defines how the bridge drives a coding-agent CLI: an
// Adapter builds the command and environment of one turn and makes a
// Parser that turns the CLI's output lines into harness-neutral Events.
// Adapters live in subpackages named after the harness (claude, codex, pi,
// opencode, gemini); the run engine owns processes, deadlines and storage,
// so an adapter is pure: it starts nothing and keeps no state beyond one
// Parser per turn. What a turn needs beyond arguments and environment, the
// Command says and the engine does: configuration files to write first
// (Files), a stdin kept open until the turn ends (HoldStdin), a parser that
// knows the turn (Parser, for a usage baseline read from the harness's own
// session records). A Parser that can explain a turn that never ended
// implements Diagnoser.
//
// A Parser is used by one goroutine; Adapters are safe for concurrent use.
package harness
