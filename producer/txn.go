package producer

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strconv"
	"time"

	"github.com/segmentio/kafka-go"
	"github.com/segmentio/kafka-go/protocol"
	"github.com/segmentio/kafka-go/protocol/addpartitionstotxn"
	"github.com/segmentio/kafka-go/protocol/endtxn"
)

// ErrFenced: a newer writer initialised the same transactional id, so the
// broker bumped the epoch and refuses this one. Nothing of the transaction
// in progress is visible to read_committed readers; the caller must stop
// writing with this TxnWriter.
var ErrFenced = errors.New("producer: fenced by a newer writer of the same transactional id")

const defaultTxnTimeout = time.Minute

// TxnWriter writes to one partition of a topic, each Produce call in a
// transaction of its own (AddPartitionsToTxn, one batch, EndTxn commit).
//
// It exists for epoch fencing, not for atomicity across partitions: the
// outbox dispatcher of partition p writes under the transactional id of p,
// so when a new owner initialises that id, the broker aborts whatever the
// old owner had in flight and refuses its later requests (PRODUCER_FENCED).
// A zombie dispatcher therefore cannot append after the new owner read the
// partition's committed tail, which the end-offset check of an idempotent
// producer could only make unlikely.
//
// A TxnWriter is not safe for concurrent use; after any error it is broken
// and the caller builds a new one (whose InitProducerId settles what the
// broken one left open, then the committed tail is the truth).
type TxnWriter struct {
	cfg       Config
	partition int
	txnID     string
	timeout   time.Duration
	log       *slog.Logger
	transport *kafka.Transport
	client    *kafka.Client
	sess      batchSession
	seq       int32
	broken    error

	// coord is a connection to the id's transaction coordinator, kept
	// across transactions: kafka-go's transport would look the coordinator
	// up again before every AddPartitionsToTxn and EndTxn, two round trips
	// of the five a transaction costs. Dropped on any error.
	coord *brokerConn
}

// TxnOptions are what a TxnWriter adds to Config.
type TxnOptions struct {
	// Partition is the one partition this writer writes.
	Partition int
	// TransactionalID names the writer for fencing; one id per partition
	// of one deployment. Required.
	TransactionalID string
	// Timeout is the transaction timeout sent to the coordinator: a writer
	// that stalls mid-transaction longer than this is aborted and fenced by
	// the broker. Default 1m (the broker's transaction.max.timeout.ms bounds it).
	Timeout time.Duration
}

// NewTxnWriter initialises the transactional id: it finds the coordinator
// and sends InitProducerId, retrying while the coordinator is loading or
// still aborting a transaction the previous holder of the id left open
// (CONCURRENT_TRANSACTIONS). Then it closes the partition (settle): an
// empty transaction, aborted, and a wait until no transaction is open on
// the partition. When it returns, every earlier writer of the id is fenced,
// and nothing an earlier writer sent to the partition can become visible
// later: the committed tail is final. ctx and Config.DeliveryTimeout bound
// the set-up.
func NewTxnWriter(ctx context.Context, cfg Config, o TxnOptions) (*TxnWriter, error) {
	cfg.setDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	switch {
	case o.TransactionalID == "":
		return nil, fieldError("TransactionalID", "required")
	case o.Partition < 0:
		return nil, fieldError("Partition", "must not be negative")
	case o.Timeout < 0:
		return nil, fieldError("Timeout", "must not be negative")
	}
	if o.Timeout == 0 {
		o.Timeout = defaultTxnTimeout
	}
	w := &TxnWriter{
		cfg: cfg, partition: o.Partition, txnID: o.TransactionalID, timeout: o.Timeout,
		log: cfg.Logger.With("component", "txn-writer", "topic", cfg.Topic, "partition", o.Partition,
			"transactional_id", o.TransactionalID),
		transport: &kafka.Transport{
			Dial: cfg.Dial, TLS: cfg.TLS, SASL: cfg.SASL, ClientID: cfg.ClientID,
			MetadataTTL: cfg.MetadataTTL, MetadataTopics: []string{cfg.Topic},
		},
	}
	w.client = &kafka.Client{Addr: kafka.TCP(cfg.Brokers...), Transport: w.transport, Timeout: cfg.RequestTimeout}
	ctx, cancel := context.WithTimeout(ctx, cfg.DeliveryTimeout)
	defer cancel()
	if err := w.init(ctx); err != nil {
		w.transport.CloseIdleConnections()
		return nil, err
	}
	if err := w.settle(ctx); err != nil {
		w.Close(ctx)
		return nil, err
	}
	w.log.Info("transactional writer initialised", "producer_id", w.sess.producerID, "epoch", w.sess.epoch)
	return w, nil
}

func (w *TxnWriter) init(ctx context.Context) error {
	return w.retry(ctx, "init producer id", func(ctx context.Context) error {
		res, err := w.client.InitProducerID(ctx, &kafka.InitProducerIDRequest{
			TransactionalID:      w.txnID,
			TransactionTimeoutMs: int(w.timeout / time.Millisecond),
			ProducerID:           -1, // a new session: fence whoever holds the id
			ProducerEpoch:        -1,
		})
		if err != nil {
			return err
		}
		if res.Error != nil {
			return res.Error
		}
		w.sess = batchSession{producerID: int64(res.Producer.ProducerID), epoch: int16(res.Producer.ProducerEpoch), transactional: true}
		return nil
	})
}

// settle makes the partition's committed tail final before anyone reads
// it. InitProducerId settles what the coordinator knows of, but a batch of
// an earlier epoch can sit on the partition in a transaction the
// coordinator holds no record of (its markers lost to a broker stopping
// mid-commit, or a produce that outlived its writer). The partition leader
// keeps such a transaction open, holding the last stable offset, and the
// next commit marker of this producer id would commit it along with our
// first batch: events the dispatcher had already resent after the tail.
//
// So the writer adds the partition and aborts the empty transaction: the
// abort marker, written with the new epoch, closes whatever the producer id
// left open there. Then it waits until the last stable offset reaches the
// end of the partition (read in that order), so the marker is in the log
// and nothing undecided is left below the tail.
func (w *TxnWriter) settle(ctx context.Context) error {
	if err := w.addPartition(ctx); err != nil {
		return err
	}
	if err := w.retry(ctx, "abort the settling transaction", func(ctx context.Context) error {
		return w.endTxn(ctx, false)
	}); err != nil {
		return err
	}
	for attempt := 0; ; attempt++ {
		stable, end, err := w.partitionEnds(ctx)
		switch {
		case err != nil:
			w.log.Debug("settle: list offsets failed, retrying", "attempt", attempt, "error", err)
		case stable >= end:
			return nil
		case attempt == 20:
			w.log.Warn("settle: a transaction is still open on the partition; waiting for its marker (does another producer write this topic?)",
				"last_stable_offset", stable, "end", end)
		}
		if !sleepCtx(ctx, backoff(time.Millisecond, w.cfg.RetryBackoffMax, attempt)) {
			if err == nil {
				err = fmt.Errorf("last stable offset %d below the end %d", stable, end)
			}
			return fmt.Errorf("producer: settle %s/%d: a transaction stays open: %w (last: %w)", w.cfg.Topic, w.partition, ctx.Err(), err)
		}
	}
}

// partitionEnds reads the partition's last stable offset, then its end
// (high watermark): both only grow, so stable >= end means that at the
// first read no transaction was open and nothing came after.
func (w *TxnWriter) partitionEnds(ctx context.Context) (stable, end int64, err error) {
	for _, iso := range []kafka.IsolationLevel{kafka.ReadCommitted, kafka.ReadUncommitted} {
		rctx, cancel := context.WithTimeout(ctx, w.cfg.RequestTimeout)
		res, err := w.client.ListOffsets(rctx, &kafka.ListOffsetsRequest{
			Topics:         map[string][]kafka.OffsetRequest{w.cfg.Topic: {kafka.LastOffsetOf(w.partition)}},
			IsolationLevel: iso,
		})
		cancel()
		if err != nil {
			return 0, 0, err
		}
		var off int64 = -1
		for _, po := range res.Topics[w.cfg.Topic] {
			if po.Partition == w.partition {
				if po.Error != nil {
					return 0, 0, po.Error
				}
				off = po.LastOffset
			}
		}
		if off < 0 {
			return 0, 0, fmt.Errorf("list offsets: partition %d not in the answer", w.partition)
		}
		if iso == kafka.ReadCommitted {
			stable = off
		} else {
			end = off
		}
	}
	return stable, end, nil
}

// Session returns the producer id and epoch the writer holds.
func (w *TxnWriter) Session() (producerID int64, epoch int16) {
	return w.sess.producerID, w.sess.epoch
}

// Produce writes recs to the writer's partition (Record.Partition is
// ignored) in one committed transaction, and returns once the commit is
// acknowledged, or with an error after Config.DeliveryTimeout at most. On
// error nothing is known of the transaction unless the error is ErrFenced
// (then it is or will be aborted); the writer is broken.
func (w *TxnWriter) Produce(ctx context.Context, recs []Record) error {
	if w.broken != nil {
		return fmt.Errorf("producer: transactional writer unusable after an earlier error: %w", w.broken)
	}
	if len(recs) == 0 {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, w.cfg.DeliveryTimeout)
	defer cancel()
	if err := w.produce(ctx, recs); err != nil {
		w.broken = err
		w.abort()
		return err
	}
	return nil
}

func (w *TxnWriter) produce(ctx context.Context, recs []Record) error {
	encoded, err := w.encode(recs)
	if err != nil {
		return err
	}
	if err := w.addPartition(ctx); err != nil {
		return err
	}
	if err := w.send(ctx, encoded, len(recs)); err != nil {
		return err
	}
	return w.retry(ctx, "commit transaction", func(ctx context.Context) error {
		return w.endTxn(ctx, true)
	})
}

// addPartition opens the transaction on the writer's partition.
func (w *TxnWriter) addPartition(ctx context.Context) error {
	return w.retry(ctx, "add partition to transaction", func(ctx context.Context) error {
		m, err := w.coordRoundTrip(ctx, &addpartitionstotxn.Request{
			TransactionalID: w.txnID, ProducerID: w.sess.producerID, ProducerEpoch: w.sess.epoch,
			Topics: []addpartitionstotxn.RequestTopic{{Name: w.cfg.Topic, Partitions: []int32{int32(w.partition)}}},
		})
		if err != nil {
			return err
		}
		for _, t := range m.(*addpartitionstotxn.Response).Results {
			for _, p := range t.Results {
				if t.Name == w.cfg.Topic && p.PartitionIndex == int32(w.partition) {
					return w.coordError(p.ErrorCode)
				}
			}
		}
		return fmt.Errorf("producer: add partition to transaction: partition %d not in the answer", w.partition)
	})
}

// send writes one encoded batch of n records in the open transaction, in
// one attempt: a retry could only be told apart from a second write by the
// sequence, and the abort that follows any error is simpler and as safe (an
// aborted batch is invisible to read_committed readers).
func (w *TxnWriter) send(ctx context.Context, encoded []byte, n int) error {
	rctx, cancel := context.WithTimeout(ctx, w.cfg.RequestTimeout)
	res, err := w.client.RawProduce(rctx, &kafka.RawProduceRequest{
		Topic: w.cfg.Topic, Partition: w.partition, RequiredAcks: kafka.RequireAll,
		TransactionalID: w.txnID,
		RawRecords:      protocol.RawRecordSet{Reader: rawReader(encoded)},
	})
	cancel()
	if err == nil && res != nil {
		err = res.Error
	}
	if err != nil {
		return w.wrap("produce", err)
	}
	w.seq += int32(n)
	return nil
}

func (w *TxnWriter) endTxn(ctx context.Context, commit bool) error {
	m, err := w.coordRoundTrip(ctx, &endtxn.Request{
		TransactionalID: w.txnID, ProducerID: w.sess.producerID, ProducerEpoch: w.sess.epoch,
		Committed: commit,
	})
	if err != nil {
		return err
	}
	return w.coordError(m.(*endtxn.Response).ErrorCode)
}

// coordRoundTrip sends req to the transaction coordinator over the kept
// connection, finding the coordinator and connecting first if need be.
func (w *TxnWriter) coordRoundTrip(ctx context.Context, req protocol.Message) (protocol.Message, error) {
	if w.coord == nil {
		res, err := w.client.FindCoordinator(ctx, &kafka.FindCoordinatorRequest{
			Key: w.txnID, KeyType: kafka.CoordinatorKeyTypeTransaction,
		})
		if err != nil {
			return nil, err
		}
		if res.Error != nil {
			return nil, res.Error
		}
		addr := net.JoinHostPort(res.Coordinator.Host, strconv.Itoa(res.Coordinator.Port))
		if w.coord, err = dialBroker(ctx, w.cfg, addr); err != nil {
			return nil, fmt.Errorf("transaction coordinator %s: %w", addr, err)
		}
	}
	m, err := w.coord.roundTrip(ctx, req)
	if err != nil {
		w.dropCoordinator()
		return nil, err
	}
	return m, nil
}

// coordError turns an error code of the coordinator into an error, and
// forgets the coordinator when it says it no longer is one.
func (w *TxnWriter) coordError(code int16) error {
	if code == 0 {
		return nil
	}
	err := kafka.Error(code)
	if err == codeNotCoordinator || err == codeCoordinatorNotAvail {
		w.dropCoordinator()
	}
	return err
}

func (w *TxnWriter) dropCoordinator() {
	if w.coord != nil {
		w.coord.close()
		w.coord = nil
	}
}

// abort tries to abort the open transaction so that the next writer of the
// id need not wait for it; if it fails, that writer's InitProducerId aborts it.
func (w *TxnWriter) abort() {
	if errors.Is(w.broken, ErrFenced) {
		return // the new holder of the id aborts it
	}
	ctx, cancel := context.WithTimeout(context.Background(), w.cfg.RequestTimeout)
	defer cancel()
	if err := w.endTxn(ctx, false); err != nil {
		w.log.Debug("abort after an error failed; the next writer's init settles it", "error", err)
	}
}

// encode builds the batch with our v2 encoder (the session marks it
// transactional).
func (w *TxnWriter) encode(recs []Record) ([]byte, error) {
	tails := make([][]byte, len(recs))
	times := make([]int64, len(recs))
	now := time.Now().UnixMilli()
	size := 0
	for i := range recs {
		tails[i] = appendRecordTail(nil, &recs[i])
		size += len(tails[i]) + recordOverhead
		times[i] = now
		if !recs[i].Time.IsZero() {
			times[i] = recs[i].Time.UnixMilli()
		}
	}
	if size > w.cfg.BatchMaxBytes {
		return nil, fmt.Errorf("%w: %d records of %d bytes, BatchMaxBytes is %d", ErrInvalidRecord, len(recs), size, w.cfg.BatchMaxBytes)
	}
	return encodeBatch(nil, w.sess, w.seq, w.cfg.Compression, tails, times)
}

// retry runs op until it succeeds, fails for good, or ctx ends. Retried:
// a coordinator loading, moving or busy settling the previous transaction
// (what the Java producer retries), and network errors of requests that are
// safe to repeat (AddPartitionsToTxn, EndTxn and InitProducerId are
// idempotent at the coordinator).
func (w *TxnWriter) retry(ctx context.Context, what string, op func(context.Context) error) error {
	for attempt := 0; ; attempt++ {
		rctx, cancel := context.WithTimeout(ctx, w.cfg.RequestTimeout)
		err := op(rctx)
		cancel()
		if err == nil {
			return nil
		}
		werr := w.wrap(what, err)
		if errors.Is(werr, ErrFenced) || errors.Is(werr, ErrRejected) {
			return werr
		}
		w.log.Debug("transaction request failed, retrying", "request", what, "attempt", attempt, "error", err)
		d := backoff(w.cfg.RetryBackoff, w.cfg.RetryBackoffMax, attempt)
		if errors.Is(err, codeConcurrentTxns) {
			// The coordinator is still writing the markers of the previous
			// transaction, a matter of milliseconds: the Java producer
			// retries AddPartitionsToTxn after 20ms for the same reason.
			d = backoff(time.Millisecond, w.cfg.RetryBackoffMax, attempt)
		}
		if !sleepCtx(ctx, d) {
			return fmt.Errorf("producer: %s: %w (last: %w)", what, ctx.Err(), werr)
		}
	}
}

// wrap classifies a transaction API error: fencing, a permanent refusal, or
// something worth retrying (returned as it is).
func (w *TxnWriter) wrap(what string, err error) error {
	var ke kafka.Error
	if errors.As(err, &ke) {
		switch ke {
		case codeProducerFenced, codeInvalidProducerEpoch, codeInvalidPIDMapping, codeTxnAborted:
			return fmt.Errorf("producer: %s: %w: %w", what, ErrFenced, err)
		case codeConcurrentTxns, codeCoordinatorLoading, codeCoordinatorNotAvail, codeNotCoordinator:
			return fmt.Errorf("producer: %s: %w", what, err)
		case codeInvalidTxnState, codeTxnTimeout:
			return fmt.Errorf("producer: %s: %w: %w", what, ErrRejected, err)
		}
		if !ke.Temporary() {
			return fmt.Errorf("producer: %s: %w: %w", what, ErrRejected, err)
		}
	}
	if refusedConnection(err) {
		return fmt.Errorf("producer: %s: %w: %w", what, ErrRejected, err)
	}
	return fmt.Errorf("producer: %s: %w", what, err)
}

// Close releases the writer's connections. Produce is synchronous, so
// nothing is in flight.
func (w *TxnWriter) Close(context.Context) error {
	w.dropCoordinator()
	w.transport.CloseIdleConnections()
	return nil
}
