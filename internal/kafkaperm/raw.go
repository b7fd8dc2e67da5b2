package kafkaperm

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"time"

	"github.com/segmentio/kafka-go"
	"github.com/segmentio/kafka-go/protocol"
	"github.com/segmentio/kafka-go/protocol/metadata"
	"github.com/segmentio/kafka-go/protocol/saslauthenticate"
	"github.com/segmentio/kafka-go/protocol/saslhandshake"
	"github.com/segmentio/kafka-go/sasl"
)

// rawMetadata sends req (v8, for the authorized operations) over a
// connection of its own: kafka-go's Transport answers metadata requests
// from its cache, without the authorized operations.
func rawMetadata(ctx context.Context, c Conn, req *metadata.Request) (*metadata.Response, error) {
	var last error
	for _, b := range c.Brokers {
		res, err := rawMetadataAt(ctx, c, b, req)
		if err == nil {
			return res, nil
		}
		last = err
	}
	return nil, last
}

func rawMetadataAt(ctx context.Context, c Conn, broker string, req *metadata.Request) (*metadata.Response, error) {
	d := net.Dialer{Timeout: 10 * time.Second}
	nc, err := d.DialContext(ctx, "tcp", broker)
	if err != nil {
		return nil, err
	}
	if c.TLS != nil {
		tc := c.TLS.Clone()
		if tc.ServerName == "" {
			host, _, _ := net.SplitHostPort(broker)
			tc.ServerName = host
		}
		t := tls.Client(nc, tc)
		if err := t.HandshakeContext(ctx); err != nil {
			_ = nc.Close()
			return nil, err
		}
		nc = t
	}
	pc := protocol.NewConn(nc, "nofly-permissions")
	defer pc.Close()
	if dl, ok := ctx.Deadline(); ok {
		_ = pc.SetDeadline(dl)
	}
	pc.SetVersions(map[protocol.ApiKey]int16{protocol.SaslHandshake: 1, protocol.SaslAuthenticate: 1, protocol.Metadata: 8})
	if c.SASL != nil {
		if err := authenticate(ctx, pc, c.SASL); err != nil {
			return nil, fmt.Errorf("sasl %s: %w", c.SASL.Name(), err)
		}
	}
	m, err := pc.RoundTrip(req)
	if err != nil {
		return nil, err
	}
	res, ok := m.(*metadata.Response)
	if !ok {
		return nil, fmt.Errorf("metadata answered %T", m)
	}
	return res, nil
}

// authenticate is kafka-go's SASL exchange (transport.go authenticateSASL).
func authenticate(ctx context.Context, pc *protocol.Conn, m sasl.Mechanism) error {
	r, err := pc.RoundTrip(&saslhandshake.Request{Mechanism: m.Name()})
	if err != nil {
		return err
	}
	if c := r.(*saslhandshake.Response).ErrorCode; c != 0 {
		return kafka.Error(c)
	}
	sess, state, err := m.Start(ctx)
	if err != nil {
		return err
	}
	for done := false; !done; {
		r, err := pc.RoundTrip(&saslauthenticate.Request{AuthBytes: state})
		if errors.Is(err, io.EOF) {
			return kafka.SASLAuthenticationFailed
		}
		if err != nil {
			return err
		}
		res := r.(*saslauthenticate.Response)
		if res.ErrorCode != 0 {
			return kafka.Error(res.ErrorCode)
		}
		if done, state, err = sess.Next(ctx, res.AuthBytes); err != nil {
			return err
		}
	}
	return nil
}
