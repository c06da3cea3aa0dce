// Package rusage reads the CPU time the process has used, for benchmarks
// that report it beside the wall time: on a machine others share, the
// wall time of a run includes the time it waited for a core.
package rusage

import (
	"syscall"
	"time"
)

// CPU returns the user and system CPU time the process has used so far.
func CPU() (time.Duration, error) {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0, err
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()), nil
}
