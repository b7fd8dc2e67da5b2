package producer

import (
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"syscall"
)

// dropProxy sits between a Kafka client and the brokers. Its Dial is given to
// the client as the transport's dial hook, so every connection goes through
// it, to the bootstrap address and to the addresses the broker advertises
// in metadata alike.
//
// It relays one request and its response at a time (kafka-go sends one
// request per connection at a time). For every dropEvery-th produce request
// (api key 0) it forwards the request, waits for the broker's response, and
// then closes the client's connection instead of forwarding it: the batch is
// in the log, the client sees a network error and retries it.
type dropProxy struct {
	dropEvery int64
	dial      net.Dialer

	down     atomic.Bool  // refuse new connections (the broker is "unreachable")
	produces atomic.Int64 // produce requests seen
	dropped  atomic.Int64 // produce responses dropped

	mu    sync.Mutex
	conns map[net.Conn]struct{}
}

func newDropProxy(dropEvery int) *dropProxy {
	return &dropProxy{dropEvery: int64(dropEvery), conns: make(map[net.Conn]struct{})}
}

// Dial has the signature of kafka.Transport.Dial.
func (p *dropProxy) Dial(ctx context.Context, network, address string) (net.Conn, error) {
	if p.down.Load() {
		return nil, &net.OpError{Op: "dial", Net: network, Err: syscall.ECONNREFUSED}
	}
	upstream, err := p.dial.DialContext(ctx, network, address)
	if err != nil {
		return nil, err
	}
	client, inner := net.Pipe()
	p.track(upstream, inner)
	go p.relay(inner, upstream)
	return client, nil
}

func (p *dropProxy) track(cs ...net.Conn) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range cs {
		p.conns[c] = struct{}{}
	}
}

// setDown makes the brokers unreachable (true) or reachable again.
func (p *dropProxy) setDown(down bool) {
	p.down.Store(down)
	if down {
		p.Close()
	}
}

// Close closes every relayed connection.
func (p *dropProxy) Close() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for c := range p.conns {
		c.Close()
	}
	clear(p.conns)
}

func (p *dropProxy) relay(client, upstream net.Conn) {
	defer func() {
		client.Close()
		upstream.Close()
		p.mu.Lock()
		delete(p.conns, client)
		delete(p.conns, upstream)
		p.mu.Unlock()
	}()
	for {
		req, err := readFrame(client)
		if err != nil {
			return
		}
		apiKey := int16(binary.BigEndian.Uint16(req[4:6]))
		drop := false
		if apiKey == 0 {
			n := p.produces.Add(1)
			drop = p.dropEvery > 0 && n%p.dropEvery == p.dropEvery/2
		}
		if _, err := upstream.Write(req); err != nil {
			return
		}
		resp, err := readFrame(upstream)
		if err != nil {
			return
		}
		if drop {
			p.dropped.Add(1)
			return // the broker has answered; the client never hears it
		}
		if _, err := client.Write(resp); err != nil {
			return
		}
	}
}

// readFrame reads one size-prefixed Kafka frame, prefix included.
func readFrame(r io.Reader) ([]byte, error) {
	var size [4]byte
	if _, err := io.ReadFull(r, size[:]); err != nil {
		return nil, err
	}
	n := binary.BigEndian.Uint32(size[:])
	if n < 4 || n > 64<<20 {
		return nil, fmt.Errorf("bad frame size %d", n)
	}
	buf := make([]byte, 4+n)
	copy(buf, size[:])
	_, err := io.ReadFull(r, buf[4:])
	return buf, err
}
