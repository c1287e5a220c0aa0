//go:build !linux

package jail

import "errors"

// limitCPUs fails: CPU affinity is Linux's, as is the jail (bubblewrap).
func limitCPUs(int) error { return errors.New("a CPU limit needs Linux") }
