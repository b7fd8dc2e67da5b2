// Command redisserver runs the embedded default's Redis (miniredis with
// internal/embedded's shims) alone, so that scripts/test.sh can run the
// Redis-backed packages' own tests against it, as against the real server:
//
//	go run ./internal/embedded/redisserver --addr-file F
//
// It writes its address to F and serves until SIGTERM or SIGINT.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/nofly-dev/nofly/internal/embedded"
)

func main() {
	addrFile := flag.String("addr-file", "", "write the server's address to this file (stdout when empty)")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	r, err := embedded.StartRedis(0)
	if err != nil {
		fmt.Fprintln(os.Stderr, "redisserver:", err)
		os.Exit(1)
	}
	defer r.Close()
	if *addrFile == "" {
		fmt.Println(r.Addr())
	} else if err := os.WriteFile(*addrFile, []byte(r.Addr()+"\n"), 0o644); err != nil {
		fmt.Fprintln(os.Stderr, "redisserver:", err)
		os.Exit(1)
	}
	<-ctx.Done()
}
