//go:build !linux

package telemetry

import "time"

// threadCPU is not measured here: only Linux reports a thread's CPU time.
func threadCPU() (time.Duration, bool) { return 0, false }
