package jail

import (
	"fmt"

	"golang.org/x/sys/unix"
)

// limitCPUs keeps this process on at most cpus of the CPUs it may run on.
func limitCPUs(cpus int) error {
	var set unix.CPUSet
	if err := unix.SchedGetaffinity(0, &set); err != nil {
		return fmt.Errorf("sched_getaffinity: %w", err)
	}
	if set.Count() <= cpus {
		return nil
	}
	var keep unix.CPUSet
	for c, n := 0, 0; n < cpus && c < 1024; c++ {
		if set.IsSet(c) {
			keep.Set(c)
			n++
		}
	}
	if err := unix.SchedSetaffinity(0, &keep); err != nil {
		return fmt.Errorf("sched_setaffinity: %w", err)
	}
	return nil
}
