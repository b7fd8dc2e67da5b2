package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"time"

	"github.com/nofly-dev/nofly/internal/embedded"
)

// stack is where the demo's Kafka and Redis are.
type stack struct {
	brokers []string
	redis   string
	// shared: real services that outlive the demo, so its topics and keys
	// are deleted afterwards (unless --keep).
	shared bool
	close  func()
}

// openStack picks the backends: the real services with --real (started
// by scripts/services.sh) or where NOFLY_KAFKA_BROKERS / NOFLY_REDIS_ADDR
// (--brokers / --redis) name them; the embedded ones otherwise.
func openStack(ctx context.Context, c config) (*stack, error) {
	st := &stack{close: func() {}}
	if c.real {
		say("starting the real Kafka and Redis (scripts/services.sh start; needs Java and Debian's redis-server)")
		if err := runCmd(ctx, "bash", "scripts/services.sh", "start"); err != nil {
			return nil, err
		}
		if c.brokers == "" {
			c.brokers = "127.0.0.1:9092"
		}
		if c.redis == "" {
			c.redis = "127.0.0.1:6379"
		}
	}
	kafkaDesc, redisDesc := "Kafka: "+c.brokers, "Redis: "+c.redis
	// Either backend not named is embedded; a named one outlives the demo.
	st.shared = c.brokers != "" || c.redis != ""
	if c.brokers == "" || c.redis == "" {
		emb, err := embedded.Start(ctx, embedded.Options{})
		if err != nil {
			return nil, err
		}
		st.close = emb.Close
		if c.brokers == "" {
			c.brokers = strings.Join(emb.Brokers(), ",")
			kafkaDesc = "Kafka: embedded broker (kfake) at " + c.brokers
		}
		if c.redis == "" {
			c.redis = emb.RedisAddr()
			redisDesc = "Redis: embedded (miniredis) at " + c.redis
		}
	}
	st.brokers, st.redis = strings.Split(c.brokers, ","), c.redis
	say("%s; %s", kafkaDesc, redisDesc)
	if !c.real && os.Getenv("NOFLY_KAFKA_BROKERS") == "" && os.Getenv("NOFLY_REDIS_ADDR") == "" {
		say("the embedded default keeps nothing across restarts and is for trying nofly out; --real runs on the real services")
	}
	return st, nil
}

// noEnv is the services' environment: none, so that a NOFLY_* variable of
// the demo's shell cannot change the run (their flags are all given).
func noEnv(string) string { return "" }

// service is ingest or the alerter running in this process through its
// command's Main, as its binary would run it.
type service struct {
	name   string
	log    string
	cancel context.CancelFunc
	done   chan int
}

type mainFunc func(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) int

func startService(ctx context.Context, name string, main mainFunc, args []string, logPath string) *service {
	ctx, cancel := context.WithCancel(ctx)
	s := &service{name: name, log: logPath, cancel: cancel, done: make(chan int, 1)}
	lf, err := os.Create(logPath)
	if err != nil {
		lf = nil
	}
	go func() {
		var w io.Writer = io.Discard
		if lf != nil {
			w = lf
			defer lf.Close()
		}
		s.done <- main(ctx, args, noEnv, w, w)
	}()
	return s
}

// stop ends the service and waits for it, at most 15 s.
func (s *service) stop() {
	s.cancel()
	select {
	case code := <-s.done:
		s.done <- code
	case <-time.After(15 * time.Second):
		fmt.Fprintf(os.Stderr, "demo: %s did not stop within 15s\n", s.name)
	}
}

func (s *service) tailLog() string {
	b, _ := os.ReadFile(s.log)
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	return strings.Join(lines[max(0, len(lines)-15):], "\n")
}

func waitHTTP(ctx context.Context, url string, s *service) error {
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		select {
		case code := <-s.done:
			s.done <- code
			return fmt.Errorf("%s exited with %d:\n%s", s.name, code, s.tailLog())
		default:
		}
		resp, err := http.Get(url)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
	return fmt.Errorf("%s did not answer %s in 60s:\n%s", s.name, url, s.tailLog())
}

func runCmd(ctx context.Context, name string, args ...string) error {
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("%s %s: %w", name, strings.Join(args, " "), err)
	}
	return nil
}
