// Command fakeoidc serves testenv's fake OpenID provider on loopback until
// it is interrupted, printing its issuer URL as its first line: the
// schemathesis run's provider, so that the sign-in routes answer as they
// do with single sign-on on (the real provider's tests use Dex).
package main

import (
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/nofly-dev/nofly/internal/testenv"
)

func main() {
	op, err := testenv.NewFakeOIDC()
	if err != nil {
		fmt.Fprintln(os.Stderr, "fakeoidc:", err)
		os.Exit(1)
	}
	defer op.Close()
	fmt.Println(op.URL)
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, os.Interrupt, syscall.SIGTERM)
	<-sig
}
