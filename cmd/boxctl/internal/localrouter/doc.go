// Package localrouter supervises a detached local model endpoint: a
// process (in boxctl, `boxctl router-stub`) that serves the model Router
// to the boxes of one `boxctl up --router local` for as long as the box
// lives, outliving the command that started it.
//
// Start runs the process in a session of its own with its output in a log
// file, and returns once it prints its URL as its first line. The returned
// Process is plain data (it goes into the box state file): it names the
// process by its pid and start time, so that Running and Stop never take a
// later process that reused the pid for it. Stop ends the whole session.
//
// Start takes an Options struct (our own component).
package localrouter
