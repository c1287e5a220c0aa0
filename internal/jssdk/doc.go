// Package jssdk installs pinned sets of npm packages (vendors' official
// JavaScript SDKs) and runs Node scripts against them, for tests that drive
// our emulators with the clients users actually run.
//
// A set is named in pins.json: its top-level dependencies, each at an exact
// version with the registry's sha512 integrity, and the complete resolved
// tree in locks/<set>.json (the packages section of a lockfileVersion 3
// package-lock.json). Ensure renders package.json and package-lock.json from
// them and installs with `npm ci`, which verifies every tarball against its
// integrity or fails, into a content-addressed directory (Dir/<hash of the
// two files and the Node version>). Installs are idempotent and safe under
// concurrent callers, in one process or many: an exclusive file lock guards
// each directory, and a marker file written last tells a complete install
// from an interrupted one.
//
// Run executes an ESM script with the installation's Node, resolving its
// imports from the installation, and returns what it printed. Scenario
// scripts print one JSON object per line, {step, ok, detail, ms}; Steps
// decodes them so a Go test can report each as a subtest.
//
// To refresh a set's lock after changing its pins, run
// `go test ./internal/jssdk -run TestLocks -update` with the test bed up.
package jssdk
