// Package boxbridgetest is a test helper: it builds the box-bridge binary
// (cmd/box-bridge) the way the Makefile does and runs it as a process for
// tests that need the real server, not the in-process one. Product code
// never imports it (internal/depcheck enforces that).
//
// Build compiles the static binary (CGO off, -trimpath) once per test
// binary and returns its path, for tests that start it here or put it into
// a box image. Start runs it on a free loopback port with a random bearer
// and its own data directory, waits until GET /health answers 200 (every
// backend ready), and stops it when the test ends. Binary builds any other
// main package of the module the same way, once, into the same directory.
//
// Built binaries live in a scratch directory that Main creates and removes
// when the tests end, so no test leaves a binary behind. A package that
// calls Build, Start or Binary runs its tests through Main:
//
//	func TestMain(m *testing.M) { boxbridgetest.Main(m) }
//
// A Proc belongs to the test that started it: the cleanup Start registers
// stops the bridge (SIGTERM, then SIGKILL to its process group) and waits
// for it. Its methods are safe for concurrent use.
package boxbridgetest
