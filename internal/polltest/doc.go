// Package polltest waits in tests for a condition that another goroutine,
// process or service brings about: a file written, a server answering, a
// box gone.
//
// Until and UntilNil call their condition at once, then with a back-off
// from 10ms up to 200ms between calls, until it holds or the timeout
// passes, and fail the test then, naming what they waited for (and, for
// UntilNil, the condition's last error). They stop as well when the test's
// context ends. The condition runs on the test's goroutine, so it may call
// t.Fatal itself, say when the process it waits on has exited.
//
// A loop that does something else than wait for a state (traffic kept up
// at a pace, an operation retried and counted, a property held for a
// while) is not a poll and stays a loop.
//
// The package imports nothing of ours, so every package's tests may use it.
package polltest
