package outbox

import (
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"regexp"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/nofly-dev/nofly/internal/redisreplica"
)

// Config configures a Dispatcher. Every field but Topic has a safe default.
type Config struct {
	// Prefix of the dedup store's keys. Default "nofly".
	Prefix string
	// Topic is the telemetry topic whose partitions own the outboxes
	// (part of the hash tag). Required.
	Topic string

	// Webhooks to deliver every event to, each at least once.
	Webhooks []Webhook
	// Alertmanager: the Alertmanagers every active alarm is posted to as
	// an alert (at least once, idempotent by labels), with the acks as
	// silences. No URL: none.
	Alertmanager Alertmanager
	// HTTPClient posts to the webhooks. Default: a client with no overall
	// timeout (each attempt is bounded by its Webhook.Timeout), up to 64
	// idle connections per host, and no redirects followed (a 3xx is a
	// permanent failure: Go would turn a redirected POST into a GET
	// without the event).
	HTTPClient *http.Client

	// BatchSize is the most entries read per XREAD, and so produced per
	// Produce call. Default 500.
	BatchSize int
	// Block is the XREAD BLOCK time: how long a read waits for new entries,
	// and so the longest a Run takes to notice its context ended. Default 250ms.
	Block time.Duration

	// Backoff is the first pause after a failed attempt (webhook POST, produce,
	// Redis error); it doubles per attempt up to BackoffMax, each pause drawn
	// in [d/2, d] (jitter). Defaults 200ms and 30s.
	Backoff    time.Duration
	BackoffMax time.Duration
	// RetryAfterMax caps a webhook's Retry-After. Default 5m.
	RetryAfterMax time.Duration
	// CloseTimeout bounds how long the Kafka output waits for batches in
	// flight when it closes its producer (on stop, or after a produce error).
	// Default 2m30s, longer than the producer's DeliveryTimeout.
	CloseTimeout time.Duration
	// LagInterval is how often the lag gauges are refreshed. Default 1s.
	LagInterval time.Duration

	// Retention is how long an entry stays in the outbox stream after it was
	// appended: it is trimmed only once it is older than this *and* every
	// output of the partition has passed it (an output that has delivered
	// nothing yet, a webhook added since, holds all of it). Kept entries
	// serve audits and outputs added later. Default 24h; negative keeps
	// every entry forever.
	Retention time.Duration
	// TrimInterval is how often the outbox is trimmed. Default 1m.
	TrimInterval time.Duration

	// Replicas, when on, holds each read batch of entries until the
	// partition's primary has that many replicas with them (WAIT after a
	// write on the reading connection, --redis-min-replicas): an entry a
	// failover could take back is never sent. Off by default.
	Replicas redisreplica.Wait

	// Registerer receives the metrics. Default: none (metrics are kept but
	// not registered).
	Registerer prometheus.Registerer
	// Logger. Default slog.Default().
	Logger *slog.Logger
}

// DefaultRetention is Config.Retention when unset.
const DefaultRetention = 24 * time.Hour

// DefaultWebhookMaxAttempts is Webhook.MaxAttempts when unset.
const DefaultWebhookMaxAttempts = 120

// Webhook is one HTTP endpoint that receives every event.
type Webhook struct {
	// Name names the output in metrics and Redis keys: 1-64 of [A-Za-z0-9._-].
	Name string
	// URL receives a POST per event. Required, http or https.
	URL string
	// Timeout bounds one attempt. Default 10s.
	Timeout time.Duration
	// MaxAttempts after which the event goes to the dead-letter stream.
	// Default 120: about an hour of backoff, or two minutes of an endpoint
	// answering Retry-After: 1, so an ordinary outage or deploy never
	// dead-letters an alarm.
	MaxAttempts int
}

// ErrInvalidConfig is wrapped by every Validate error.
var ErrInvalidConfig = errors.New("outbox: invalid config")

// ErrRunning is returned by Run for a partition that is already running.
var ErrRunning = errors.New("outbox: partition already running")

var nameRE = regexp.MustCompile(`^[A-Za-z0-9._-]{1,64}$`)

func (c *Config) setDefaults() {
	if c.Prefix == "" {
		c.Prefix = "nofly"
	}
	if c.HTTPClient == nil {
		tr := http.DefaultTransport.(*http.Transport).Clone()
		tr.MaxIdleConnsPerHost = 64
		c.HTTPClient = &http.Client{
			Transport:     tr,
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		}
	}
	if c.BatchSize == 0 {
		c.BatchSize = 500
	}
	if c.Block == 0 {
		c.Block = 250 * time.Millisecond
	}
	if c.Backoff == 0 {
		c.Backoff = 200 * time.Millisecond
	}
	if c.BackoffMax == 0 {
		c.BackoffMax = 30 * time.Second
	}
	if c.RetryAfterMax == 0 {
		c.RetryAfterMax = 5 * time.Minute
	}
	if c.CloseTimeout == 0 {
		c.CloseTimeout = 150 * time.Second
	}
	if c.LagInterval == 0 {
		c.LagInterval = time.Second
	}
	if c.Retention == 0 {
		c.Retention = DefaultRetention
	}
	if c.TrimInterval == 0 {
		c.TrimInterval = time.Minute
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	hooks := make([]Webhook, len(c.Webhooks))
	copy(hooks, c.Webhooks)
	for i := range hooks {
		if hooks[i].Timeout == 0 {
			hooks[i].Timeout = 10 * time.Second
		}
		if hooks[i].MaxAttempts == 0 {
			hooks[i].MaxAttempts = DefaultWebhookMaxAttempts
		}
	}
	c.Webhooks = hooks
	c.Alertmanager.setDefaults()
}

// Validate reports the first bad field by name. NewDispatcher calls it after
// applying defaults.
func (c Config) Validate() error {
	switch {
	case c.Topic == "":
		return fieldError("Topic", "required")
	case c.BatchSize < 0:
		return fieldError("BatchSize", "must not be negative")
	case c.Block < 0:
		return fieldError("Block", "must not be negative")
	case c.Backoff < 0:
		return fieldError("Backoff", "must not be negative")
	case c.Replicas.Validate() != nil:
		return fieldError("Replicas", c.Replicas.Validate().Error())
	case c.BackoffMax < 0 || (c.BackoffMax > 0 && c.BackoffMax < c.Backoff):
		return fieldError("BackoffMax", "must be at least Backoff")
	case c.RetryAfterMax < 0:
		return fieldError("RetryAfterMax", "must not be negative")
	case c.CloseTimeout < 0:
		return fieldError("CloseTimeout", "must not be negative")
	case c.LagInterval < 0:
		return fieldError("LagInterval", "must not be negative")
	case c.TrimInterval < 0:
		return fieldError("TrimInterval", "must not be negative")
	}
	if err := c.Alertmanager.validate(); err != nil {
		return err
	}
	seen := make(map[string]bool)
	for i, w := range c.Webhooks {
		f := func(name string) string { return fmt.Sprintf("Webhooks[%d].%s", i, name) }
		if !nameRE.MatchString(w.Name) {
			return fieldError(f("Name"), fmt.Sprintf("%q: want 1-64 of [A-Za-z0-9._-]", w.Name))
		}
		if seen[w.Name] {
			return fieldError(f("Name"), fmt.Sprintf("%q is used twice", w.Name))
		}
		seen[w.Name] = true
		u, err := url.Parse(w.URL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return fieldError(f("URL"), fmt.Sprintf("%q: want an absolute http or https URL", w.URL))
		}
		if w.Timeout < 0 {
			return fieldError(f("Timeout"), "must not be negative")
		}
		if w.MaxAttempts < 0 {
			return fieldError(f("MaxAttempts"), "must not be negative")
		}
	}
	return nil
}

func fieldError(field, msg string) error {
	return fmt.Errorf("%w: %s: %s", ErrInvalidConfig, field, msg)
}
