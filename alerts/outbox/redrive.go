package outbox

import (
	"context"
	"errors"
	"fmt"

	"github.com/redis/go-redis/v9"

	"github.com/nofly-dev/nofly/internal/redislayout"
)

// ErrRedriveStopped is wrapped by Redrive's error when the endpoint refused
// or failed a dead letter: that one and the later ones stay.
var ErrRedriveStopped = errors.New("outbox: redrive stopped")

// RedriveResult counts one partition's redrive of one webhook.
type RedriveResult struct {
	Partition int
	// DeadLetters is how many the stream held when the redrive started.
	DeadLetters int
	// Redelivered were answered 2xx and removed from the stream.
	Redelivered int
}

// Redrive posts the dead letters of webhook w in partition's outbox again,
// oldest first, one attempt each, with the same body and Idempotency-Key
// (event_id) as the first time, to w.URL (which may have been fixed since),
// and removes each one the endpoint answers 2xx. It stops at the first that
// fails, which stays in the stream with the later ones (ErrRedriveStopped).
// With dryRun it only counts. A running dispatcher may go on appending dead
// letters meanwhile; they are left for the next redrive.
//
// Redriven events reach the endpoint after events delivered since they were
// dead-lettered: receivers order by the event's seq and ts, and dedup on
// the Idempotency-Key, as for any at-least-once delivery.
func Redrive(ctx context.Context, rdb redis.UniversalClient, cfg Config, w Webhook, partition int, dryRun bool) (RedriveResult, error) {
	res := RedriveResult{Partition: partition}
	cfg.Webhooks = []Webhook{w}
	cfg.setDefaults()
	if err := cfg.Validate(); err != nil {
		return res, err
	}
	o := &output{name: redislayout.WebhookOutput(w.Name), partition: partition, cfg: &cfg, rdb: rdb,
		keys: redislayout.Of(cfg.Prefix, cfg.Topic, partition), hook: cfg.Webhooks[0]}
	stream := o.keys.Dead(o.name)
	n, err := rdb.XLen(ctx, stream).Result()
	if err != nil {
		return res, fmt.Errorf("outbox: xlen %s: %w", stream, err)
	}
	res.DeadLetters = int(n)
	if dryRun || n == 0 {
		return res, nil
	}
	after := redislayout.StartID
	for {
		dls, err := redislayout.ReadDeadLetters(ctx, rdb, o.keys, o.name, after, 100)
		if err != nil {
			return res, fmt.Errorf("outbox: %w", err)
		}
		for _, d := range dls {
			e := d.Entry
			if e.EventID == "" || len(e.Event) == 0 {
				return res, fmt.Errorf("outbox: dead letter %s of %s has no event_id or event", d.ID, stream)
			}
			r := o.post(ctx, e)
			if classifyAttempt(r) != delivered {
				return res, fmt.Errorf("%w: partition %d, event %s (dead letter %s): %s", ErrRedriveStopped, partition, e.EventID, d.ID, describe(r))
			}
			if err := rdb.XDel(ctx, stream, d.ID).Err(); err != nil {
				return res, fmt.Errorf("outbox: event %s redelivered, but xdel %s %s: %w (it will be posted again next time)", e.EventID, stream, d.ID, err)
			}
			res.Redelivered++
		}
		if len(dls) < 100 {
			return res, nil
		}
		after = dls[len(dls)-1].ID
	}
}
