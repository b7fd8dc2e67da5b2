package httpserve

import (
	"io"
	"log/slog"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Metrics are a server's connection gauges and counters.
type Metrics struct {
	open    prometheus.Gauge
	max     prometheus.Gauge
	refused prometheus.Counter
}

// NewMetrics registers the connection metrics on reg (nil: not
// registered): nofly_http_connections, nofly_http_connections_max and
// nofly_http_connections_refused_total.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		open: prometheus.NewGauge(prometheus.GaugeOpts{Name: "nofly_http_connections",
			Help: "Open HTTP connections (the listener's count, which --http-max-conns caps)."}),
		max: prometheus.NewGauge(prometheus.GaugeOpts{Name: "nofly_http_connections_max",
			Help: "The cap on open HTTP connections in force (--http-max-conns, lowered to what the file descriptor limit leaves)."}),
		refused: prometheus.NewCounter(prometheus.CounterOpts{Name: "nofly_http_connections_refused_total",
			Help: "Connections answered 503 too_many_connections and closed because the cap was reached."}),
	}
	if reg != nil {
		reg.MustRegister(m.open, m.max, m.refused)
	}
	return m
}

// Refusal is the whole HTTP answer written to a connection over the cap:
// 503 with the service's JSON error body, Retry-After and Connection:
// close.
func Refusal(body []byte) []byte {
	return []byte("HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\nRetry-After: 1\r\nConnection: close\r\n" +
		"Cache-Control: no-store\r\nContent-Length: " + strconv.Itoa(len(body)) + "\r\n\r\n" + string(body))
}

// Listener counts the connections it accepted that are still open and
// caps them: beyond max it still accepts (so the backlog does not fill and
// hold clients in the dark), writes the refusal and closes. The count is
// the server's connections only: the process's own Kafka and Redis
// connections are not in it, and the cap is kept below the file descriptor
// limit (FDLimit) so that they always find a descriptor.
type Listener struct {
	net.Listener
	max     int64
	refusal []byte
	m       *Metrics
	log     *slog.Logger

	open     atomic.Int64
	lingers  chan struct{} // refused connections being closed gracefully
	lastWarn atomic.Int64  // unix nanos of the last "cap reached" warning
}

// lingerSlots bounds the refused connections closed gracefully at once
// (the refusal written, the write side shut, what the client sent read
// for up to lingerFor, so it reads the 503 rather than a reset); past it
// they are closed at once.
const (
	lingerSlots = 64
	lingerFor   = time.Second
)

// NewListener caps ln at max open connections (metrics may be nil).
func NewListener(ln net.Listener, max int, refusal []byte, m *Metrics, log *slog.Logger) *Listener {
	if m == nil {
		m = NewMetrics(nil)
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	m.max.Set(float64(max))
	return &Listener{Listener: ln, max: int64(max), refusal: refusal, m: m, log: log, lingers: make(chan struct{}, lingerSlots)}
}

// Open is the number of open connections.
func (l *Listener) Open() int { return int(l.open.Load()) }

// Accept returns the next connection under the cap; those over it are
// refused here and never reach the server.
func (l *Listener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		if l.open.Add(1) > l.max {
			l.open.Add(-1)
			l.refuse(c)
			continue
		}
		l.m.open.Inc()
		return &conn{Conn: c, l: l}, nil
	}
}

func (l *Listener) refuse(c net.Conn) {
	l.m.refused.Inc()
	now := time.Now().UnixNano()
	if last := l.lastWarn.Load(); now-last > int64(10*time.Second) && l.lastWarn.CompareAndSwap(last, now) {
		l.log.Warn("http: connection cap reached; refusing connections with 503 too_many_connections",
			"max_conns", l.max, "remote", c.RemoteAddr().String())
	}
	select {
	case l.lingers <- struct{}{}:
		go func() {
			defer func() { <-l.lingers }()
			_ = c.SetDeadline(time.Now().Add(lingerFor))
			if _, err := c.Write(l.refusal); err == nil {
				if cw, ok := c.(interface{ CloseWrite() error }); ok {
					_ = cw.CloseWrite()
					_, _ = io.Copy(io.Discard, io.LimitReader(c, 64<<10))
				}
			}
			_ = c.Close()
		}()
	default:
		// A fresh socket's send buffer takes the few hundred bytes without
		// blocking; the deadline is for a socket that would not.
		_ = c.SetWriteDeadline(time.Now().Add(50 * time.Millisecond))
		_, _ = c.Write(l.refusal)
		_ = c.Close()
	}
}

// conn gives its slot back when it is closed (once).
type conn struct {
	net.Conn
	l    *Listener
	once sync.Once
}

func (c *conn) Close() error {
	err := c.Conn.Close()
	c.once.Do(func() {
		c.l.open.Add(-1)
		c.l.m.open.Dec()
	})
	return err
}

// CloseWrite lets net/http shut the write side before it closes (its
// lingering close after an answer to a request whose body it did not
// read).
func (c *conn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return nil
}
