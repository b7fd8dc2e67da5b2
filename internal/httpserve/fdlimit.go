package httpserve

import (
	"log/slog"
	"net"
)

// FDReserve is how many file descriptors the cap on connections leaves to
// the process itself: its Kafka and Redis connections (the alerter's are
// at most about partitions × (4 + outputs) + 20 × GOMAXPROCS: 100 with 12
// partitions, one output and 2 cores), its files, and the refused
// connections being closed (lingerSlots). docs/operations.md, "Limits".
const FDReserve = 512

// minConns is the least cap Listen lowers to, however low the descriptor
// limit: a server that refuses everyone serves nobody.
const minConns = 16

// MaxConns is the cap on connections to use under the file descriptor
// limit fds (0: unknown): want, or fds - FDReserve when that is less (ok
// false then).
func MaxConns(want int, fds uint64) (n int, ok bool) {
	if fds == 0 || uint64(want)+FDReserve <= fds {
		return want, true
	}
	if fds <= FDReserve+minConns {
		return minConns, false
	}
	return int(fds - FDReserve), false
}

// Listen listens on addr (TCP) with the cap l.HTTPMaxConns, lowered, with a
// warning, to what the file descriptor limit (FDLimit, which Go raised to
// the hard limit at start) leaves after FDReserve. refusal is the service's
// JSON error body for a connection over the cap, given the cap in force
// (Refusal makes the answer).
func (l Limits) Listen(addr string, refusal func(maxConns int) []byte, m *Metrics, log *slog.Logger) (*Listener, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	fds := FDLimit()
	n, ok := MaxConns(l.HTTPMaxConns, fds)
	if !ok {
		log.Warn("http: --http-max-conns lowered to what the file descriptor limit leaves for Kafka, Redis and files; raise `ulimit -n` (LimitNOFILE) to serve more",
			"http_max_conns", l.HTTPMaxConns, "fd_limit", fds, "reserved", FDReserve, "max_conns", n)
	}
	return NewListener(ln, n, Refusal(refusal(n)), m, log), nil
}
