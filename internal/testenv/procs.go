package testenv

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// KafkaProc is a private Kafka node that one test owns, so it may stop and
// restart it without disturbing the shared broker other packages use.
type KafkaProc struct {
	t       testing.TB
	port    int
	ctlPort int
	dir     string
	props   []string
	env     []string // more of scripts/kafka.sh's settings (StartSecureKafka)
}

// StartKafka starts a private single-node KRaft broker on free ports through
// scripts/kafka.sh, and stops it when the test ends.
func StartKafka(t testing.TB) *KafkaProc { return StartKafkaWith(t) }

// StartKafkaWith is StartKafka with lines added to the broker's
// server.properties (later lines override earlier ones). When the test
// fails, the warnings and errors of the broker's log are logged with it.
func StartKafkaWith(t testing.TB, props ...string) *KafkaProc {
	t.Helper()
	return startKafka(t, &KafkaProc{t: t, port: FreePort(t), ctlPort: FreePort(t), dir: t.TempDir(), props: props})
}

func startKafka(t testing.TB, k *KafkaProc) *KafkaProc {
	t.Helper()
	t.Cleanup(func() {
		_ = k.run(context.Background(), "stop")
		if t.Failed() {
			k.logBrokerTrouble()
		}
	})
	if err := k.run(context.Background(), "start"); err != nil {
		t.Fatalf("start private kafka: %v", err)
	}
	return k
}

// logBrokerTrouble logs the last warnings and errors of the broker's log
// (its directory goes with the test's).
func (k *KafkaProc) logBrokerTrouble() {
	logKafkaTrouble(k.t, "private kafka "+k.Brokers()[0], filepath.Join(k.dir, "server.log"))
}

// logKafkaTrouble logs the last warnings and errors of a broker's
// server.log, and the start markers the scripts write into it.
func logKafkaTrouble(t testing.TB, name, path string) {
	b, err := os.ReadFile(path)
	if err != nil {
		t.Logf("%s: no server.log: %v", name, err)
		return
	}
	var lines []string
	for _, l := range strings.Split(string(b), "\n") {
		if strings.Contains(l, "] WARN ") || strings.Contains(l, "] ERROR ") || strings.HasPrefix(l, "==== ") {
			lines = append(lines, l)
		}
	}
	const keep = 80
	if len(lines) > keep {
		lines = lines[len(lines)-keep:]
	}
	t.Logf("%s, last %d warnings and errors of server.log:\n%s", name, len(lines), strings.Join(lines, "\n"))
}

// Brokers returns the private broker's address.
func (k *KafkaProc) Brokers() []string { return []string{fmt.Sprintf("127.0.0.1:%d", k.port)} }

// DataDir is the broker's log directory (topic-partition folders live there).
func (k *KafkaProc) DataDir() string { return filepath.Join(k.dir, "data") }

// Stop stops the broker gracefully (SIGTERM, then SIGKILL after 60 s).
func (k *KafkaProc) Stop(ctx context.Context) error { return k.run(ctx, "stop") }

// Start starts it again on the same ports and data.
func (k *KafkaProc) Start(ctx context.Context) error { return k.run(ctx, "start") }

// Restart stops and starts the broker, keeping its data.
func (k *KafkaProc) Restart(ctx context.Context) error {
	if err := k.Stop(ctx); err != nil {
		return err
	}
	return k.Start(ctx)
}

func (k *KafkaProc) run(ctx context.Context, verb string) error {
	return runScript(ctx, "kafka.sh", verb, append([]string{
		"KAFKA_PORT=" + strconv.Itoa(k.port),
		"KAFKA_CONTROLLER_PORT=" + strconv.Itoa(k.ctlPort),
		"KAFKA_DIR=" + k.dir,
		"KAFKA_HEAP_OPTS=-Xms128m -Xmx512m",
		// No C2 compiler: half the CPU to start (scripts/kafka.sh); a test's
		// few records never need it.
		"KAFKA_JVM_OPTS=-XX:TieredStopAtLevel=1",
		"KAFKA_EXTRA_PROPS=" + strings.Join(k.props, "\n")}, k.env...)...)
}

// RedisProc is a private Redis server one test owns and may restart.
type RedisProc struct {
	port int
	dir  string
	env  []string // more of scripts/redis.sh's settings (StartSecureRedis)
}

// StartRedis starts a private redis-server (AOF, appendfsync always) on a free
// port through scripts/redis.sh, and stops it when the test ends.
func StartRedis(t testing.TB) *RedisProc {
	t.Helper()
	return startRedis(t, &RedisProc{port: FreePort(t), dir: t.TempDir()})
}

func startRedis(t testing.TB, r *RedisProc) *RedisProc {
	t.Helper()
	t.Cleanup(func() { _ = r.run(context.Background(), "stop") })
	if err := r.run(context.Background(), "start"); err != nil {
		t.Fatalf("start private redis: %v", err)
	}
	return r
}

// Addr returns host:port.
func (r *RedisProc) Addr() string { return fmt.Sprintf("127.0.0.1:%d", r.port) }

// Stop stops the server (SIGTERM: Redis fsyncs the AOF on the way out).
func (r *RedisProc) Stop(ctx context.Context) error { return r.run(ctx, "stop") }

// Kill stops the server with SIGKILL: only what appendfsync always already
// wrote survives.
func (r *RedisProc) Kill() error {
	b, err := os.ReadFile(filepath.Join(r.dir, "redis.pid"))
	if err != nil {
		return err
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		return err
	}
	p, err := os.FindProcess(pid)
	if err != nil {
		return err
	}
	if err := p.Kill(); err != nil {
		return err
	}
	return WaitFor(context.Background(), 10*time.Second, func() error {
		if PingRedis(context.Background(), r.Addr()) == nil {
			return fmt.Errorf("redis still answers")
		}
		return nil
	})
}

// Start starts it again with the same AOF.
func (r *RedisProc) Start(ctx context.Context) error { return r.run(ctx, "start") }

// Restart stops and starts the server, keeping its AOF.
func (r *RedisProc) Restart(ctx context.Context) error {
	if err := r.Stop(ctx); err != nil {
		return err
	}
	return r.Start(ctx)
}

func (r *RedisProc) run(ctx context.Context, verb string) error {
	return runScript(ctx, "redis.sh", verb, append([]string{"REDIS_PORT=" + strconv.Itoa(r.port), "REDIS_DIR=" + r.dir}, r.env...)...)
}

// KafkaLibs returns the directory of the Kafka jars (for kafka.tools.*
// classes such as DumpLogSegments), installing them if needed.
func KafkaLibs(t testing.TB) string {
	t.Helper()
	cmd := exec.Command("bash", filepath.Join(RepoRoot(), "scripts", "kafka.sh"), "libs")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("scripts/kafka.sh libs: %v", err)
	}
	return strings.TrimSpace(string(out))
}

func runScript(ctx context.Context, script, verb string, env ...string) error {
	return runScriptArgs(ctx, script, []string{verb}, env...)
}

func runScriptArgs(ctx context.Context, script string, args []string, env ...string) error {
	ctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", append([]string{filepath.Join(RepoRoot(), "scripts", script)}, args...)...)
	cmd.Env = append(os.Environ(), env...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("scripts/%s %s: %w\n%s", script, strings.Join(args, " "), err, out)
	}
	return nil
}
