package benchcompare

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// clockTick is USER_HZ, the unit of /proc/PID/stat's times: 100 on every
// Linux architecture Go runs on (the kernel fixes it for user space).
const clockTick = 10 * time.Millisecond

// ParseStat returns utime + stime of a /proc/PID/stat line: the CPU the
// process has used, all its threads included, in clock ticks. The command
// name (field 2) is in parentheses and may hold spaces or ')', so fields
// are counted from the last ')'.
func ParseStat(line []byte) (ticks uint64, err error) {
	i := bytes.LastIndexByte(line, ')')
	if i < 0 {
		return 0, fmt.Errorf("benchcompare: stat line without a command name: %.40q", line)
	}
	f := strings.Fields(string(line[i+1:]))
	// After the name: state (3), ppid (4), … utime (14), stime (15).
	const utime, stime = 14 - 3, 15 - 3
	if len(f) <= stime {
		return 0, fmt.Errorf("benchcompare: stat line has %d fields after the name, want > %d", len(f), stime)
	}
	u, err := strconv.ParseUint(f[utime], 10, 64)
	if err != nil {
		return 0, fmt.Errorf("benchcompare: utime: %w", err)
	}
	s, err := strconv.ParseUint(f[stime], 10, 64)
	if err != nil {
		return 0, fmt.Errorf("benchcompare: stime: %w", err)
	}
	return u + s, nil
}

// ProcCPU returns the CPU process pid has used so far.
func ProcCPU(pid int) (time.Duration, error) {
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return 0, fmt.Errorf("benchcompare: cpu of pid %d: %w", pid, err)
	}
	t, err := ParseStat(b)
	if err != nil {
		return 0, err
	}
	return time.Duration(t) * clockTick, nil
}

// pidFile reads a pid file and checks that the process runs and its
// command line contains pattern (so a recycled pid is not measured).
func pidFile(path, pattern string) (int, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, fmt.Errorf("benchcompare: pid file: %w", err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		return 0, fmt.Errorf("benchcompare: pid file %s: %w", path, err)
	}
	return pid, checkPid(pid, pattern)
}

func checkPid(pid int, pattern string) error {
	cmd, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "cmdline"))
	if err != nil {
		return fmt.Errorf("benchcompare: pid %d is not running here: %w", pid, err)
	}
	if !bytes.Contains(cmd, []byte(pattern)) {
		return fmt.Errorf("benchcompare: pid %d is not %s (%.60q)", pid, pattern, bytes.ReplaceAll(cmd, []byte{0}, []byte{' '}))
	}
	return nil
}

// sampler reads the CPU of a fixed set of processes; a process it cannot
// read (pid 0: not found) counts as absent, not zero.
type sampler struct {
	names []string
	pids  []int
}

type sample struct {
	at  time.Time
	cpu []time.Duration // -1: absent
}

func (s *sampler) add(name string, pid int) {
	s.names = append(s.names, name)
	s.pids = append(s.pids, pid)
}

func (s *sampler) take() sample {
	out := sample{at: time.Now(), cpu: make([]time.Duration, len(s.pids))}
	for i, pid := range s.pids {
		out.cpu[i] = -1
		if pid > 0 {
			if c, err := ProcCPU(pid); err == nil {
				out.cpu[i] = c
			}
		}
	}
	return out
}

// delta is the CPU each process used between a and b (-1: absent).
func delta(a, b sample) []time.Duration {
	d := make([]time.Duration, len(a.cpu))
	for i := range d {
		d[i] = -1
		if a.cpu[i] >= 0 && b.cpu[i] >= 0 {
			d[i] = b.cpu[i] - a.cpu[i]
		}
	}
	return d
}
