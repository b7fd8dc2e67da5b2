package producer

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"strconv"
	"sync"
	"time"

	"github.com/segmentio/kafka-go"
	"github.com/segmentio/kafka-go/protocol"
	"github.com/segmentio/kafka-go/protocol/apiversions"
	"github.com/segmentio/kafka-go/protocol/initproducerid"
	"github.com/segmentio/kafka-go/protocol/saslauthenticate"
	"github.com/segmentio/kafka-go/protocol/saslhandshake"
	"github.com/segmentio/kafka-go/sasl"
)

// initProducerID asks a broker for a new producer id (epoch 0), sending
// producer id and epoch as -1.
//
// It talks to one broker directly over protocol.Conn. kafka-go's
// Client.InitProducerID also works against the real broker (see
// TestKafkaGoInitProducerIDOnRealBroker) but routes the request as a
// TransactionalMessage through a FindCoordinator lookup keyed by the empty
// transactional id, an extra round trip whose answer an idempotent producer
// does not need: any broker answers an InitProducerId without a
// transactional id, and for such a request it always allocates a new id.
func (p *Producer) initProducerID(ctx context.Context) (batchSession, error) {
	var errs []error
	for _, addr := range p.cfg.Brokers {
		s, err := p.initProducerIDAt(ctx, addr)
		if err == nil {
			return s, nil
		}
		errs = append(errs, fmt.Errorf("%s: %w", addr, err))
		if ctx.Err() != nil {
			break
		}
	}
	return batchSession{}, fmt.Errorf("init producer id: %w", errors.Join(errs...))
}

func (p *Producer) initProducerIDAt(ctx context.Context, addr string) (batchSession, error) {
	ctx, cancel := context.WithTimeout(ctx, p.cfg.RequestTimeout)
	defer cancel()
	bc, err := dialBroker(ctx, p.cfg, addr)
	if err != nil {
		return batchSession{}, err
	}
	defer bc.close()
	m, err := bc.roundTrip(ctx, &initproducerid.Request{
		TransactionalID:      "", // null: idempotent, not transactional
		TransactionTimeoutMs: math.MaxInt32,
		ProducerID:           -1,
		ProducerEpoch:        -1,
	})
	if err != nil {
		return batchSession{}, err
	}
	res := m.(*initproducerid.Response)
	if res.ErrorCode != 0 {
		return batchSession{}, kafka.Error(res.ErrorCode)
	}
	return batchSession{producerID: res.ProducerID, epoch: res.ProducerEpoch}, nil
}

// brokerConn is one connection to one broker speaking kafka-go's protocol
// package, API versions negotiated: for requests that must reach a given
// broker without kafka-go's per-request routing.
type brokerConn struct {
	conn net.Conn
	pc   *protocol.Conn
}

// dialBroker connects as kafka-go's Transport does: TLS (ServerName from
// the address when the config leaves it empty, or verification fails),
// ApiVersions, then the SASL exchange. The TLS handshake runs here, within
// ctx, so a bad certificate is reported as that and not as a failed request.
func dialBroker(ctx context.Context, cfg Config, addr string) (*brokerConn, error) {
	conn, err := cfg.Dial(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	if cfg.TLS != nil {
		tc := cfg.TLS
		if tc.ServerName == "" {
			host, _, _ := net.SplitHostPort(addr)
			tc = tc.Clone()
			tc.ServerName = host
		}
		t := tls.Client(conn, tc)
		if err := t.HandshakeContext(ctx); err != nil {
			conn.Close()
			return nil, fmt.Errorf("tls handshake: %w", err)
		}
		conn = t
	}
	bc := &brokerConn{conn: conn, pc: protocol.NewConn(conn, cfg.ClientID)}
	m, err := bc.roundTrip(ctx, new(apiversions.Request))
	if err != nil {
		conn.Close()
		return nil, fmt.Errorf("api versions: %w", err)
	}
	av := m.(*apiversions.Response)
	if av.ErrorCode != 0 {
		conn.Close()
		return nil, fmt.Errorf("api versions: %w", kafka.Error(av.ErrorCode))
	}
	versions := make(map[protocol.ApiKey]int16, len(av.ApiKeys))
	for _, k := range av.ApiKeys {
		key := protocol.ApiKey(k.ApiKey)
		versions[key] = key.SelectVersion(k.MinVersion, k.MaxVersion)
	}
	bc.pc.SetVersions(versions)
	if cfg.SASL != nil {
		if err := bc.authenticate(ctx, cfg.SASL, addr); err != nil {
			conn.Close()
			return nil, fmt.Errorf("sasl %s: %w", cfg.SASL.Name(), err)
		}
	}
	return bc, nil
}

// authenticate runs the SASL exchange of kafka-go's transport
// (authenticateSASL): SaslHandshake names the mechanism, then
// SaslAuthenticate rounds carry its messages until it is done. A refusal is
// kafka.SASLAuthenticationFailed with the broker's message, which names the
// mechanism, never the password.
func (bc *brokerConn) authenticate(ctx context.Context, mech sasl.Mechanism, addr string) error {
	host, portStr, err := net.SplitHostPort(addr)
	if err != nil {
		return err
	}
	port, _ := strconv.Atoi(portStr)
	ctx = sasl.WithMetadata(ctx, &sasl.Metadata{Host: host, Port: port})
	m, err := bc.roundTrip(ctx, &saslhandshake.Request{Mechanism: mech.Name()})
	if err != nil {
		return fmt.Errorf("handshake: %w", err)
	}
	if code := m.(*saslhandshake.Response).ErrorCode; code != 0 {
		return fmt.Errorf("handshake: %w", kafka.Error(code))
	}
	sess, state, err := mech.Start(ctx)
	if err != nil {
		return err
	}
	for done := false; !done; {
		m, err := bc.roundTrip(ctx, &saslauthenticate.Request{AuthBytes: state})
		if err != nil {
			if errors.Is(err, io.EOF) {
				// A broker may end a failed exchange by closing the connection.
				return kafka.SASLAuthenticationFailed
			}
			return err
		}
		res := m.(*saslauthenticate.Response)
		if res.ErrorCode != 0 {
			if res.ErrorMessage != "" {
				return fmt.Errorf("%w: %s", kafka.Error(res.ErrorCode), res.ErrorMessage)
			}
			return kafka.Error(res.ErrorCode)
		}
		if done, state, err = sess.Next(ctx, res.AuthBytes); err != nil {
			return err
		}
	}
	return nil
}

// roundTrip sends req and reads its answer, within ctx: its deadline, and
// its cancellation, which unblocks the connection at once.
func (bc *brokerConn) roundTrip(ctx context.Context, req protocol.Message) (protocol.Message, error) {
	stop := context.AfterFunc(ctx, func() { bc.conn.SetDeadline(time.Unix(1, 0)) })
	defer stop()
	dl, _ := ctx.Deadline() // zero: none
	bc.conn.SetDeadline(dl)
	return bc.pc.RoundTrip(req)
}

func (bc *brokerConn) close() { bc.conn.Close() }

// session is the producer id and epoch every batch carries, and the gate
// that keeps batches from being sent while the epoch changes.
//
// Invariant: an epoch bump happens only when no batch is in flight. A batch
// still being retried under the old epoch after a bump could have been
// written under the old epoch and then, retried under the new one, written
// again: the broker deduplicates only within one epoch.
type session struct {
	mu       sync.Mutex
	cur      batchSession
	inflight int
	bumping  bool
	changed  chan struct{} // closed and replaced whenever the state changes
}

func (s *session) notifyLocked() {
	close(s.changed)
	s.changed = make(chan struct{})
}

// acquire waits until no bump is pending and registers one batch in flight
// under the returned session.
func (s *session) acquire(ctx context.Context) (batchSession, error) {
	for {
		s.mu.Lock()
		if !s.bumping {
			s.inflight++
			cur := s.cur
			s.mu.Unlock()
			return cur, nil
		}
		ch := s.changed
		s.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return batchSession{}, ctx.Err()
		}
	}
}

func (s *session) release() {
	s.mu.Lock()
	s.inflight--
	if s.inflight == 0 {
		s.notifyLocked()
	}
	s.mu.Unlock()
}

// requestBump marks that the session seen by a failed batch must be bumped.
// It reports whether the caller should run the bump (false when another
// batch already asked for it, or it already happened).
func (s *session) requestBump(seen batchSession) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.bumping || s.cur != seen {
		return false
	}
	s.bumping = true
	s.notifyLocked()
	return true
}

// waitIdle waits until no batch is in flight.
func (s *session) waitIdle(ctx context.Context) error {
	for {
		s.mu.Lock()
		if s.inflight == 0 {
			s.mu.Unlock()
			return nil
		}
		ch := s.changed
		s.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

func (s *session) finishBump(next batchSession) {
	s.mu.Lock()
	s.cur = next
	s.bumping = false
	s.notifyLocked()
	s.mu.Unlock()
}

func (s *session) current() batchSession {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.cur
}
