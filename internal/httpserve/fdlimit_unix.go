//go:build unix

package httpserve

import "syscall"

// FDLimit is the process's soft limit on open file descriptors (ulimit -n;
// Go raises it to the hard limit at start), 0 when unknown or unlimited.
func FDLimit() uint64 {
	var rl syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl); err != nil {
		return 0
	}
	n := uint64(rl.Cur)  //nolint:unconvert // an int64 on some systems
	if n == ^uint64(0) { // RLIM_INFINITY
		return 0
	}
	return n
}
