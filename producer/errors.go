package producer

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"sort"
	"strings"
	"syscall"

	"github.com/segmentio/kafka-go"
	"github.com/segmentio/kafka-go/protocol"
)

// Sentinel errors; test them with errors.Is on what Produce returns.
var (
	// ErrBrokerUnavailable: the records were not acknowledged within
	// DeliveryTimeout because the broker could not be reached or had no
	// leader for the partition (network errors, NOT_LEADER, restarts). They
	// may or may not be in the log. HTTP answers 503 with Retry-After.
	ErrBrokerUnavailable = errors.New("producer: broker unavailable")
	// ErrSequence: the broker's answer showed that the idempotent session
	// lost continuity for the partition (OUT_OF_ORDER_SEQUENCE_NUMBER,
	// UNKNOWN_PRODUCER_ID, INVALID_PRODUCER_EPOCH, PRODUCER_FENCED). The
	// producer bumped its epoch; the records may be retried.
	ErrSequence = errors.New("producer: idempotent sequence lost")
	// ErrAborted: the records were never sent because an earlier batch of
	// the same partition failed; sending them would have put them in the
	// log ahead of the failed ones. Retrying them in order is safe.
	ErrAborted = errors.New("producer: aborted after an earlier batch of the partition failed")
	// ErrRejected: the broker refused the batch with a non-retriable error
	// (too large, invalid record, authorization...). Not written.
	ErrRejected = errors.New("producer: rejected by the broker")
	// ErrInvalidRecord: the record cannot be produced as given (partition out
	// of range, larger than BatchMaxBytes). Nothing of the call was sent.
	ErrInvalidRecord = errors.New("producer: invalid record")
	// ErrClosed: the producer is closed, or was closed before the records
	// were acknowledged.
	ErrClosed = errors.New("producer: closed")
)

// Retriable reports whether records that failed with err may succeed if
// produced again later: the broker was unavailable, the session was
// re-established, an earlier batch failed, or the wait was cut short. Use it to
// choose between 503 and 4xx/500.
func Retriable(err error) bool {
	return errors.Is(err, ErrBrokerUnavailable) || errors.Is(err, ErrSequence) ||
		errors.Is(err, ErrAborted) || errors.Is(err, context.DeadlineExceeded)
}

// RecordError is the failure of one record of a Produce call.
type RecordError struct {
	Index int // index into the slice passed to Produce
	Err   error
}

// ProduceError says which records of a Produce call were not acknowledged,
// and why. Records not listed were acknowledged by the broker (acks=all).
type ProduceError struct {
	Records []RecordError // ascending Index
}

// Indexes returns the indexes of the records that were not acknowledged.
func (e *ProduceError) Indexes() []int {
	out := make([]int, len(e.Records))
	for i, r := range e.Records {
		out[i] = r.Index
	}
	return out
}

func (e *ProduceError) Error() string {
	causes := e.Unwrap()
	msgs := make([]string, len(causes))
	for i, c := range causes {
		msgs[i] = c.Error()
	}
	return fmt.Sprintf("producer: %d record(s) not acknowledged (first index %d): %s",
		len(e.Records), e.Records[0].Index, strings.Join(msgs, "; "))
}

// Unwrap returns the distinct causes, so errors.Is(err, ErrBrokerUnavailable)
// holds when any record failed for that reason.
func (e *ProduceError) Unwrap() []error {
	var out []error
	seen := make(map[error]bool)
	for _, r := range e.Records {
		if !seen[r.Err] {
			seen[r.Err] = true
			out = append(out, r.Err)
		}
	}
	return out
}

func newProduceError(errs map[int]error) *ProduceError {
	pe := &ProduceError{Records: make([]RecordError, 0, len(errs))}
	for i, err := range errs {
		pe.Records = append(pe.Records, RecordError{Index: i, Err: err})
	}
	sort.Slice(pe.Records, func(i, j int) bool { return pe.Records[i].Index < pe.Records[j].Index })
	return pe
}

// outcome classifies one produce attempt.
type outcome int

const (
	outcomeOK        outcome = iota
	outcomeDuplicate         // DUPLICATE_SEQUENCE_NUMBER: already written
	outcomeRetry             // retriable; the batch may or may not have been written
	outcomeRetryMeta         // retriable after a metadata refresh (leader moved)
	outcomeSequence          // the broker lost our sequence: fail the batch, bump the epoch
	outcomeFenced            // the broker holds a newer epoch of our id: fail the batch, get a new id
	outcomeRejected          // not written, will never be: fail the batch
)

// Kafka error codes kafka-go names differently or does not mark Temporary.
const (
	codeDuplicateSequence    = kafka.Error(46)
	codeOutOfOrderSequence   = kafka.Error(45)
	codeInvalidProducerEpoch = kafka.Error(47)
	codeUnknownProducerID    = kafka.Error(59)
	codeProducerFenced       = kafka.Error(90)
	codeConcurrentTxns       = kafka.Error(51)

	// The transaction APIs' (TxnWriter).
	codeCoordinatorLoading  = kafka.Error(14)
	codeCoordinatorNotAvail = kafka.Error(15)
	codeNotCoordinator      = kafka.Error(16)
	codeInvalidTxnState     = kafka.Error(48)
	codeInvalidPIDMapping   = kafka.Error(49)
	codeTxnTimeout          = kafka.Error(50) // INVALID_TRANSACTION_TIMEOUT
	codeTxnAborted          = kafka.Error(89) // TRANSACTION_ABORTABLE (KIP-890)
)

// classify maps the result of one RawProduce to what the Java producer does
// with it (Sender.completeBatch / canRetry).
func classify(err error) outcome {
	if err == nil {
		return outcomeOK
	}
	var ke kafka.Error
	if errors.As(err, &ke) {
		switch ke {
		case codeDuplicateSequence:
			return outcomeDuplicate
		case codeOutOfOrderSequence, codeUnknownProducerID:
			return outcomeSequence
		case codeInvalidProducerEpoch, codeProducerFenced:
			return outcomeFenced
		case kafka.NotLeaderForPartition, kafka.LeaderNotAvailable, kafka.UnknownTopicOrPartition,
			kafka.FencedLeaderEpoch, kafka.UnknownLeaderEpoch, kafka.BrokerNotAvailable,
			kafka.ReplicaNotAvailable, kafka.KafkaStorageError:
			return outcomeRetryMeta
		case codeConcurrentTxns:
			return outcomeRetry
		}
		if ke.Temporary() {
			return outcomeRetry
		}
		return outcomeRejected
	}
	// kafka-go's routing errors: the cached layout has no leader (yet).
	if errors.Is(err, protocol.ErrNoTopic) || errors.Is(err, protocol.ErrNoPartition) ||
		errors.Is(err, protocol.ErrNoLeader) {
		return outcomeRetryMeta
	}
	if isNetworkError(err) {
		return outcomeRetry
	}
	var te interface{ Temporary() bool }
	if errors.As(err, &te) && te.Temporary() {
		return outcomeRetry
	}
	// Anything else from the transport (a connection closed under us in a
	// way not listed above) is treated as network trouble too: retrying the
	// same bytes and sequence can never duplicate, giving up could lose.
	return outcomeRetry
}

func isNetworkError(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.ECONNRESET) ||
		errors.Is(err, syscall.EPIPE) || errors.Is(err, net.ErrClosed) ||
		errors.Is(err, context.DeadlineExceeded)
}

// refusedConnection reports whether err is a connection refused for its
// settings: SASL credentials or mechanism refused, or a failed TLS
// handshake (an untrusted or mismatched certificate, TLS against a
// plaintext listener). No retry fixes those, so set-up gives up at once
// with the reason instead of as a broker that seemed unavailable.
func refusedConnection(err error) bool {
	var ke kafka.Error
	if errors.As(err, &ke) {
		switch ke {
		case kafka.SASLAuthenticationFailed, kafka.UnsupportedSASLMechanism, kafka.IllegalSASLState:
			return true
		}
	}
	var (
		rh tls.RecordHeaderError
		cv *tls.CertificateVerificationError
		ua x509.UnknownAuthorityError
		he x509.HostnameError
		ci x509.CertificateInvalidError
		al tls.AlertError
	)
	if errors.As(err, &rh) || errors.As(err, &cv) || errors.As(err, &ua) || errors.As(err, &he) ||
		errors.As(err, &ci) || errors.As(err, &al) {
		return true
	}
	// An alert from the server (it refused our client certificate) is, on a
	// TCP connection, a *net.OpError of Op "remote error" around an
	// unexported type; tls.AlertError is only QUIC's. In TLS 1.3 it comes
	// with the first read after the handshake.
	var oe *net.OpError
	return errors.As(err, &oe) && oe.Op == "remote error"
}
