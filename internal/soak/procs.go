package soak

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/nofly-dev/nofly/internal/benchcompare"
	"github.com/nofly-dev/nofly/internal/redislayout"
)

// treeCPU is the CPU pid and all its descendants have used so far (a
// browser and its renderers, GPU and utility processes); processes that
// have exited are no longer counted, so a tree's figure is taken as a
// difference between two samples of the same live processes.
func treeCPU(pid int) (time.Duration, error) {
	if pid <= 0 {
		return 0, fmt.Errorf("soak: no pid")
	}
	children := map[int][]int{}
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return 0, fmt.Errorf("soak: list processes: %w", err)
	}
	for _, e := range ents {
		p, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		if pp, ok := ppidOf(b); ok {
			children[pp] = append(children[pp], p)
		}
	}
	var total time.Duration
	todo := []int{pid}
	for len(todo) > 0 {
		p := todo[len(todo)-1]
		todo = todo[:len(todo)-1]
		c, err := benchcompare.ProcCPU(p)
		if err != nil {
			if p == pid {
				return 0, err
			}
			continue // exited meanwhile
		}
		total += c
		todo = append(todo, children[p]...)
	}
	return total, nil
}

// ppidOf is field 4 of a /proc/PID/stat line (after the parenthesised
// command name, which may hold spaces).
func ppidOf(stat []byte) (int, bool) {
	i := bytes.LastIndexByte(stat, ')')
	if i < 0 {
		return 0, false
	}
	f := strings.Fields(string(stat[i+1:]))
	if len(f) < 2 {
		return 0, false
	}
	p, err := strconv.Atoi(f[1])
	return p, err == nil
}

// rssMB is a process's resident set (VmRSS) in MB.
func rssMB(pid int) (float64, error) {
	f, err := os.Open(filepath.Join("/proc", strconv.Itoa(pid), "status"))
	if err != nil {
		return 0, fmt.Errorf("soak: rss of %d: %w", pid, err)
	}
	defer f.Close()
	return parseVmRSS(f)
}

func parseVmRSS(r interface{ Read([]byte) (int, error) }) (float64, error) {
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "VmRSS:"); ok {
			f := strings.Fields(v)
			if len(f) != 2 || f[1] != "kB" {
				return 0, fmt.Errorf("soak: VmRSS %q", v)
			}
			kb, err := strconv.ParseFloat(f[0], 64)
			if err != nil {
				return 0, fmt.Errorf("soak: VmRSS: %w", err)
			}
			return kb * 1024 / 1e6, nil
		}
	}
	if err := sc.Err(); err != nil {
		return 0, err
	}
	return 0, fmt.Errorf("soak: no VmRSS")
}

// redisUsedMB is INFO memory's used_memory in MB.
func redisUsedMB(ctx context.Context, rdb *redis.Client) (float64, error) {
	info, err := rdb.Info(ctx, "memory").Result()
	if err != nil {
		return 0, fmt.Errorf("soak: redis INFO memory: %w", err)
	}
	return parseUsedMemory(info)
}

func parseUsedMemory(info string) (float64, error) {
	for line := range strings.Lines(info) {
		if v, ok := strings.CutPrefix(strings.TrimRight(line, "\r\n"), "used_memory:"); ok {
			n, err := strconv.ParseFloat(v, 64)
			if err != nil {
				return 0, fmt.Errorf("soak: used_memory %q: %w", v, err)
			}
			return n / 1e6, nil
		}
	}
	return 0, fmt.Errorf("soak: INFO without used_memory")
}

// ownRedis is the memory of the run's own keys (every key under its
// prefix; MEMORY USAGE, which estimates a large hash, set or stream from
// a sample of its elements) in MB, and their count: on a shared Redis,
// used_memory is mostly other users'.
func ownRedis(ctx context.Context, rdb *redis.Client, prefix string) (mb float64, keys int, err error) {
	iter := rdb.Scan(ctx, 0, redislayout.Match(prefix), 1000).Iterator()
	var names []string
	for iter.Next(ctx) {
		names = append(names, iter.Val())
	}
	if err := iter.Err(); err != nil {
		return 0, 0, fmt.Errorf("soak: scan the run's keys: %w", err)
	}
	// In pipelines of 1,000: one of a national fleet's keys at once
	// outlasts the client's write timeout.
	var sum int64
	for i := 0; i < len(names); i += 1000 {
		pipe := rdb.Pipeline()
		var cmds []*redis.IntCmd
		for _, k := range names[i:min(i+1000, len(names))] {
			cmds = append(cmds, pipe.MemoryUsage(ctx, k))
		}
		if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
			return 0, 0, fmt.Errorf("soak: MEMORY USAGE of the run's keys: %w", err)
		}
		for _, c := range cmds {
			sum += c.Val() // a key gone since the scan: 0
		}
	}
	return float64(sum) / 1e6, len(names), nil
}

// maxGauge is the largest value of a labelled gauge in a Prometheus text
// exposition (-1 when it has no series).
func maxGauge(text, name string) float64 {
	m := -1.0
	for line := range strings.Lines(text) {
		rest, ok := strings.CutPrefix(line, name+"{")
		if !ok {
			continue
		}
		_, v, ok := strings.Cut(rest, "} ")
		if !ok {
			continue
		}
		if f, err := strconv.ParseFloat(strings.Fields(v)[0], 64); err == nil {
			m = max(m, f)
		}
	}
	return m
}

// ingestLagSeconds is ingest's own lag gauge, the age of the oldest record
// the group has not committed, the largest of the partitions (-1: none
// yet); ingest measures it every 5 s.
func ingestLagSeconds(ctx context.Context, ingestAddr string) (float64, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+ingestAddr+"/metrics", nil)
	if err != nil {
		return 0, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, fmt.Errorf("soak: ingest metrics: %w", err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, fmt.Errorf("soak: ingest metrics: %w", err)
	}
	return maxGauge(string(b), "nofly_ingest_consumer_lag_seconds"), nil
}
