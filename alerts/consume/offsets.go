package consume

import (
	"context"
	"log/slog"
	"sync"

	"github.com/segmentio/kafka-go"
)

// offsetCommitter commits the generation's offsets to Kafka, after Redis:
// partitions offer the offset after each committed batch, and one goroutine
// commits the latest of every partition in one OffsetCommit request as soon
// as the previous one is done. kafka-go's CommitOffsets is a synchronous
// round trip on the coordinator connection; doing it in each partition's
// loop halved the alerter's throughput, and the guarantee does not rest on
// it (the resume point is Redis's applied offset).
type offsetCommitter struct {
	mu      sync.Mutex
	pending map[int]int64
	wake    chan struct{}
}

func newOffsetCommitter() *offsetCommitter {
	return &offsetCommitter{pending: map[int]int64{}, wake: make(chan struct{}, 1)}
}

func (oc *offsetCommitter) offer(partition int, next int64) {
	oc.mu.Lock()
	oc.pending[partition] = next
	oc.mu.Unlock()
	select {
	case oc.wake <- struct{}{}:
	default:
	}
}

func (oc *offsetCommitter) take() map[int]int64 {
	oc.mu.Lock()
	defer oc.mu.Unlock()
	if len(oc.pending) == 0 {
		return nil
	}
	p := oc.pending
	oc.pending = map[int]int64{}
	return p
}

func (oc *offsetCommitter) run(ctx context.Context, gen *kafka.Generation, topic string, log *slog.Logger) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-oc.wake:
		}
		if p := oc.take(); p != nil {
			if err := gen.CommitOffsets(map[string]map[int]int64{topic: p}); err != nil && ctx.Err() == nil {
				log.Debug("commit offsets to kafka", "err", err)
			}
		}
	}
}
