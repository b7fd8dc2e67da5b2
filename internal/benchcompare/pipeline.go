package benchcompare

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/segmentio/kafka-go"
)

// PipelineConfig is ingest and an alerter to start as processes on the
// real Kafka and Redis, on topics, a consumer group and a Redis prefix of
// their own: what cmd/bench and cmd/soak run against.
type PipelineConfig struct {
	Brokers    string
	Redis      string
	Partitions int
	// Zones is the alerter's --zones file (the zone store's seed).
	Zones string
	// RunPrefix starts the run's id ("bench-", "soak-").
	RunPrefix string
	// BinDir holds prebuilt ingest and alerter binaries; empty: built
	// into a temporary directory (from the repository root).
	BinDir string
	// LogDir keeps the processes' logs; empty: removed with the run.
	LogDir string
	// IngestArgs and AlerterArgs are flags added to each command's own.
	IngestArgs, AlerterArgs []string
	// IngestLag has ingest measure the run's group's lag
	// (nofly_ingest_consumer_lag_seconds; --lag-groups).
	IngestLag bool
	Log       *slog.Logger
}

// Pipeline is a started ingest and alerter. Close stops them and deletes
// the run's topics, group and Redis keys.
type Pipeline struct {
	RunID, Topic, EventsTopic string
	// IngestAddr and AlerterAddr are host:port of ingest's HTTP intake and
	// the alerter's --http (API, metrics).
	IngestAddr, AlerterAddr string
	IngestPID, AlerterPID   int
	// Bin is the directory of the binaries (for alerter api-token).
	Bin        string
	partitions int
	ingest     *proc
	alerter    *proc
	rdb        *redis.Client
	kc         *kafka.Client
	cleanup    func()
	closed     bool
}

// StartPipeline builds (unless cfg.BinDir) and starts ingest and the
// alerter, and returns once ingest is ready, the alerter holds every
// partition and its dispatchers have had time to start their
// transactional producers.
func StartPipeline(ctx context.Context, cfg PipelineConfig) (_ *Pipeline, err error) {
	log := cfg.Log
	if log == nil {
		log = slog.New(slog.NewTextHandler(os.Stderr, nil))
	}
	_, logDir, bin, cleanup, err := workDirs(ctx, log, "nofly-"+cfg.RunPrefix, cfg.BinDir, cfg.LogDir)
	if err != nil {
		return nil, err
	}
	runID := cfg.RunPrefix + strconv.FormatInt(time.Now().UnixNano()/1e6, 36)
	brokers := strings.Split(cfg.Brokers, ",")
	p := &Pipeline{RunID: runID, Topic: runID + ".telemetry.positions", EventsTopic: runID + ".alerts.events",
		IngestAddr: freeAddr(), AlerterAddr: freeAddr(), Bin: bin, partitions: cfg.Partitions,
		rdb: redis.NewClient(&redis.Options{Addr: cfg.Redis}),
		kc:  &kafka.Client{Addr: kafka.TCP(brokers...), Timeout: 10 * time.Second}, cleanup: cleanup}
	defer func() {
		if err != nil {
			p.Close()
		}
	}()
	// Flags, not NOFLY_* variables: a flag the command no longer has stops
	// it at start, and flags win over the shell's NOFLY_* variables.
	common := []string{"--brokers=" + cfg.Brokers, "--topic=" + p.Topic,
		"--partitions=" + strconv.Itoa(cfg.Partitions), "--log-level=warn"}
	ingestArgs := append([]string{"serve", "--addr=" + p.IngestAddr}, common...)
	if cfg.IngestLag {
		ingestArgs = append(ingestArgs, "--lag-groups="+runID)
	}
	p.ingest, err = startProc(filepath.Join(bin, "ingest"), append(ingestArgs, cfg.IngestArgs...),
		filepath.Join(logDir, runID+".ingest.log"))
	if err != nil {
		return nil, err
	}
	p.alerter, err = startProc(filepath.Join(bin, "alerter"), append(append([]string{"serve", "--redis=" + cfg.Redis,
		"--redis-prefix=" + runID, "--group=" + runID, "--zones=" + cfg.Zones,
		// A run's audit trail stays in its own Redis prefix (the shared
		// default topic holds earlier runs' trails).
		"--events-topic=" + p.EventsTopic, "--http=" + p.AlerterAddr, "--audit-topic="}, common...), cfg.AlerterArgs...),
		filepath.Join(logDir, runID+".alerter.log"))
	if err != nil {
		return nil, err
	}
	log.Info("starting", "run", runID, "ingest", p.IngestAddr, "alerter", p.AlerterAddr, "logs", logDir)
	if err := waitHTTP(ctx, "http://"+p.IngestAddr+"/readyz", p.ingest); err != nil {
		return nil, err
	}
	if err := waitAssigned(ctx, "http://"+p.AlerterAddr+"/metrics", cfg.Partitions, p.alerter); err != nil {
		return nil, err
	}
	// Each partition's dispatcher starts its transactional producer on
	// assignment; let those finish so a run times the traffic only.
	if err := sleepCtx(ctx, 2*time.Second); err != nil {
		return nil, err
	}
	p.IngestPID, p.AlerterPID = p.ingest.cmd.Process.Pid, p.alerter.cmd.Process.Pid
	return p, nil
}

// Close stops the processes, then deletes the run's topics, group and
// Redis keys and its temporary directory. A second call does nothing.
func (p *Pipeline) Close() {
	if p.closed {
		return
	}
	p.closed = true
	for _, pr := range []*proc{p.ingest, p.alerter} {
		if pr != nil {
			pr.stop()
		}
	}
	cleanupRun(p.rdb, p.kc, p.RunID, p.RunID, p.Topic, p.EventsTopic)
	p.rdb.Close()
	p.cleanup()
}

// Lag is the telemetry topic's end offsets and the group's committed
// offsets, summed over the partitions.
func (p *Pipeline) Lag(ctx context.Context) (end, done int64, err error) {
	return groupLag(ctx, p.kc, p.Topic, p.RunID, p.partitions)
}

// Exited is the error of a process that has stopped, with its log's tail;
// nil while both run.
func (p *Pipeline) Exited() error {
	if err := p.ingest.exited(); err != nil {
		return err
	}
	return p.alerter.exited()
}

// AlerterLogTail is the last lines of the alerter's log.
func (p *Pipeline) AlerterLogTail() string { return p.alerter.tailLog() }

// IngestLogTail is the last lines of ingest's log.
func (p *Pipeline) IngestLogTail() string { return p.ingest.tailLog() }

// AlerterMetrics reads the named unlabelled metrics of the alerter's
// /metrics.
func (p *Pipeline) AlerterMetrics(ctx context.Context, names ...string) (map[string]float64, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+p.AlerterAddr+"/metrics", nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, fmt.Errorf("alerter metrics: %w", err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, fmt.Errorf("alerter metrics: %w", err)
	}
	return MetricValues(string(b), names...)
}

// RedisPID is the pid Redis reports (INFO server), checked to be a
// redis process here; its version too.
func RedisPID(ctx context.Context, rdb *redis.Client) (pid int, version string, err error) {
	s, err := redisInfo(ctx, rdb)
	if err != nil {
		return 0, "", fmt.Errorf("%w (is it running? bash scripts/services.sh start)", err)
	}
	return s.PID, s.Version, checkPid(s.PID, "redis")
}

// KafkaPIDFrom reads a broker's pid file and checks the process is a
// Kafka broker running here.
func KafkaPIDFrom(path string) (int, error) { return pidFile(path, "kafka") }
