// Command serve runs the embedded default's broker and Redis (kfake and
// miniredis with internal/embedded's shims) alone, so that scripts/test.sh
// can run the packages' own integration tests against them as against the
// real services:
//
//	go run ./internal/embedded/serve --env-file F
//
// It writes NOFLY_KAFKA_BROKERS=… and NOFLY_REDIS_ADDR=… lines to F (stdout
// when empty) and serves until SIGTERM or SIGINT.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/nofly-dev/nofly/internal/embedded"
)

func main() {
	envFile := flag.String("env-file", "", "write the servers' NOFLY_* variables to this file (stdout when empty)")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	s, err := embedded.Start(ctx, embedded.Options{})
	if err != nil {
		fmt.Fprintln(os.Stderr, "embedded:", err)
		os.Exit(1)
	}
	defer s.Close()
	env := fmt.Sprintf("NOFLY_KAFKA_BROKERS=%s\nNOFLY_REDIS_ADDR=%s\n", strings.Join(s.Brokers(), ","), s.RedisAddr())
	if *envFile == "" {
		fmt.Print(env)
	} else if err := os.WriteFile(*envFile, []byte(env), 0o644); err != nil {
		fmt.Fprintln(os.Stderr, "embedded:", err)
		os.Exit(1)
	}
	<-ctx.Done()
}
