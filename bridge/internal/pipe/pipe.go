// Package pipe holds the stdout pipe of a harness: the write end the
// child prints to, and a reader that costs the host little while the
// child prints a burst.
package pipe

import "errors"

// ErrStopped is what a Reader's Read returns once Stop was called.
var ErrStopped = errors.New("pipe reading stopped")
