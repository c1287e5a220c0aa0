// Package harnesstest runs a harness adapter end to end in tests: a bridge
// in process (engine, store and HTTP server) with one backend, whose real
// CLI is installed from npm at an exact version (internal/npmtest), pointed
// at a router stub (internal/routerstub) that accepts only a fresh
// random key. Chat posts a streaming turn and decodes its legacy SSE
// stream into a Turn for assertions.
//
// Everything Start creates belongs to the test and is torn down by its
// cleanups: the bridge is closed (killing any live harness), then the
// stub. A Live is used by one test goroutine.
package harnesstest
