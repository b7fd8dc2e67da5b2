//go:build unix

package alerterd

import (
	"log/slog"
	"os"
	"os/signal"
	"slices"
	"strconv"
	"sync/atomic"
	"syscall"

	"github.com/nofly-dev/nofly/alerts"
	"github.com/nofly-dev/nofly/alerts/consume"
)

// Test-only fault injection: TestZombieProof needs an alerter frozen with a
// batch applied and its Redis commit not yet sent, so that the commit goes
// out, after the partition moved to another alerter and its version moved
// on, and is refused (dedup.ErrFenced). A SIGSTOP sent from outside lands
// wherever the process happens to be, and whether the resumed process gets
// to send a commit before its heartbeat ends the generation is timing (it
// did in about one run in three); this point stops it exactly there.
//
// NOFLY_FAULT_STOP_BEFORE_COMMIT=N (TEST ONLY, never set it in production):
// just before the N-th batch commit the process starts, the batch already
// applied, the process stops itself with SIGSTOP; on SIGCONT that commit
// goes ahead with the expected version it was applied on. Once per
// process. The count is over all the process's partitions, not per engine:
// SIGSTOP freezes the whole process anyway, and the proof does not depend
// on which partition trips it (the test waits until the other alerter moved
// every partition's version on). Unset or empty: off; the variable is read
// once, when the alerter is built, and the hot path pays one nil check.
const faultStopBeforeCommitEnv = "NOFLY_FAULT_STOP_BEFORE_COMMIT"

// NOFLY_FAULT_STOP_BEFORE_EVENT=TYPE (TEST ONLY): as above, before the
// first batch commit whose batch holds an event of that type (signal_lost:
// the clock proof stops the alerter between a tick's arrival and the
// commit of what the tick decided, then SIGKILLs it).
const faultStopBeforeEventEnv = "NOFLY_FAULT_STOP_BEFORE_EVENT"

// faults is the process's fault injection; nil is off.
type faults struct {
	stopBeforeCommit int64        // N
	commits          atomic.Int64 // commits started
	eventType        string       // stop before the first commit with one
	stopped          atomic.Bool
}

// faultsFromEnv returns the fault injection getenv asks for, nil if none.
func faultsFromEnv(getenv func(string) string, log *slog.Logger) *faults {
	if typ := getenv(faultStopBeforeEventEnv); typ != "" {
		log.Warn("TEST-ONLY fault injection on: the process stops itself (SIGSTOP) before the first commit with an event of this type",
			"env", faultStopBeforeEventEnv, "type", typ)
		return &faults{eventType: typ}
	}
	v := getenv(faultStopBeforeCommitEnv)
	if v == "" {
		return nil
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n < 1 {
		log.Error("test-only fault injection: ignoring "+faultStopBeforeCommitEnv+": want a positive commit count", "value", v)
		return nil
	}
	log.Warn("TEST-ONLY fault injection on: the process stops itself (SIGSTOP) before its N-th batch commit",
		"env", faultStopBeforeCommitEnv, "n", n)
	return &faults{stopBeforeCommit: n}
}

// beforeCommit is called just before each batch commit; on the N-th it
// stops the process and returns once the process got SIGCONT.
func (f *faults) beforeCommit(expected int64, events []alerts.Event, log *slog.Logger) {
	if f == nil {
		return
	}
	if f.eventType != "" {
		if !slices.ContainsFunc(events, func(e alerts.Event) bool { return e.Type == f.eventType }) || f.stopped.Swap(true) {
			return
		}
	} else if f.commits.Add(1) != f.stopBeforeCommit {
		return
	}
	cont := make(chan os.Signal, 1)
	signal.Notify(cont, syscall.SIGCONT)
	defer signal.Stop(cont)
	log.Warn("fault injection: stopping the process (SIGSTOP) before this commit", "commit", f.stopBeforeCommit, "expected", expected)
	if err := syscall.Kill(os.Getpid(), syscall.SIGSTOP); err != nil {
		log.Error("fault injection: SIGSTOP", "err", err)
		return
	}
	<-cont // the stop may take effect after Kill returned: commit only once resumed
	log.Warn("fault injection: resumed; sending the commit", "expected", expected)
}

// hook is the runtime's BeforeCommit hook (consume.Options), nil when off.
func (f *faults) hook(log *slog.Logger) func(consume.CommitPoint) {
	if f == nil {
		return nil
	}
	return func(c consume.CommitPoint) {
		f.beforeCommit(c.Expected, c.Events, log.With("partition", c.Partition, "generation", c.Generation))
	}
}
