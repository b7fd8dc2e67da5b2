package alerterd

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/nofly-dev/nofly/alerts/outbox"
	"github.com/nofly-dev/nofly/internal/redisconn"
)

// redriveCmd posts the dead letters of one webhook again, partition by
// partition, and prints a line per partition that had any. Safe beside
// running alerters: they only append dead letters, the redrive only removes
// those it redelivered.
func redriveCmd(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	c := DefaultConfig()
	fs := newFlagSet("alerter redrive")
	fs.SetOutput(stderr)
	for _, field := range []string{"Topic", "RedisAddr", "RedisUser", "RedisPasswordFile", "RedisTLS", "RedisTLSCA", "RedisTLSCert", "RedisTLSKey", "RedisPrefix", "WebhookTimeout"} {
		fs.field(&c, field, usages[field])
	}
	fs.field(&c, "Partitions", "partition count of the telemetry topic (one outbox each)")
	var hook webhookFlag
	fs.Var(&hook, "webhook", "NAME=URL: the webhook whose dead letters are posted again, to URL (required)")
	dryRun := fs.Bool("dry-run", false, "only count the dead letters")
	if err := fs.Parse(args, getenv); err != nil {
		return err
	}
	switch {
	case len(hook) != 1:
		return fmt.Errorf("%w: --webhook NAME=URL is required, once", ErrConfig)
	case c.Partitions < 1:
		return badField("Partitions", "must be at least 1")
	case c.WebhookTimeout <= 0:
		return badField("WebhookTimeout", "must be positive")
	}
	w := outbox.Webhook{Name: hook[0].Name, URL: hook[0].URL, Timeout: c.WebhookTimeout}
	cfg := outbox.Config{Prefix: c.RedisPrefix, Topic: c.Topic}
	if err := (outbox.Config{Topic: c.Topic, Webhooks: []outbox.Webhook{w}}).Validate(); err != nil {
		return fmt.Errorf("%w: --webhook: %v", ErrConfig, err)
	}
	rdb, err := c.openRedis(ctx, redisconn.Tuning{Name: "nofly-redrive", DialTimeout: 5 * time.Second})
	if err != nil {
		return err
	}
	defer rdb.Close()
	total, redelivered := 0, 0
	for p := range c.Partitions {
		res, err := outbox.Redrive(ctx, rdb, cfg, w, p, *dryRun)
		total += res.DeadLetters
		redelivered += res.Redelivered
		if res.DeadLetters > 0 {
			fmt.Fprintf(stdout, "partition %d: %d dead letters, %d redelivered\n", p, res.DeadLetters, res.Redelivered)
		}
		if err != nil {
			return fmt.Errorf("webhook %s: %w (%d of %d redelivered so far; run it again once the endpoint is back)", w.Name, err, redelivered, total)
		}
	}
	fmt.Fprintf(stdout, "webhook %s: %d dead letters in %d partitions, %d redelivered\n", w.Name, total, c.Partitions, redelivered)
	return nil
}
