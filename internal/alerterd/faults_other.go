//go:build !unix

package alerterd

import (
	"log/slog"

	"github.com/nofly-dev/nofly/alerts"
	"github.com/nofly-dev/nofly/alerts/consume"
)

// faults.go's test-only fault injection needs SIGSTOP, which this platform
// does not have: NOFLY_FAULT_STOP_BEFORE_COMMIT is ignored here.
const faultStopBeforeCommitEnv = "NOFLY_FAULT_STOP_BEFORE_COMMIT"

type faults struct{}

func faultsFromEnv(getenv func(string) string, log *slog.Logger) *faults {
	if getenv(faultStopBeforeCommitEnv) != "" {
		log.Error("test-only fault injection: " + faultStopBeforeCommitEnv + " is not supported on this platform; ignored")
	}
	return nil
}

func (*faults) beforeCommit(int64, []alerts.Event, *slog.Logger) {}

func (*faults) hook(*slog.Logger) func(consume.CommitPoint) { return nil }
