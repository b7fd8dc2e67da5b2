package outbox

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/nofly-dev/nofly/internal/redislayout"
)

// attemptResult is the outcome of one POST.
type attemptResult struct {
	status     int           // HTTP status, 0 when no answer
	err        error         // network error, timeout
	retryAfter time.Duration // from a 429 or 503 answer
}

// verdict classifies an attempt.
type verdict int

const (
	delivered verdict = iota
	retriable         // network error, timeout, 5xx, 429, 408
	permanent         // any other status: sending it again will not help
)

func classifyAttempt(r attemptResult) verdict {
	switch {
	case r.err != nil:
		return retriable
	case r.status >= 200 && r.status < 300:
		return delivered
	case r.status >= 500, r.status == http.StatusTooManyRequests, r.status == http.StatusRequestTimeout:
		return retriable
	default:
		return permanent
	}
}

// post sends one event once.
func (o *output) post(ctx context.Context, e redislayout.Entry) attemptResult {
	// A POST in flight when the output stops is let finish (within its
	// Timeout): cut short, its outcome is unknown and the event would be
	// sent again after the restart.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), o.hook.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, o.hook.URL, bytes.NewReader(e.Event))
	if err != nil {
		return attemptResult{err: fmt.Errorf("outbox: webhook %s: %w", o.hook.Name, err)}
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Idempotency-Key", e.EventID)
	resp, err := o.cfg.HTTPClient.Do(req)
	if err != nil {
		return attemptResult{err: fmt.Errorf("outbox: webhook %s: %w", o.hook.Name, err)}
	}
	// Drain a little so the connection can be reused.
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	_ = resp.Body.Close()
	return attemptResult{status: resp.StatusCode, retryAfter: retryAfter(resp.Header.Get("Retry-After"), time.Now())}
}

// outcome of delivering one entry.
type outcome struct {
	delivered bool
	attempts  int
	last      attemptResult
	reason    string // why it was dead-lettered
}

// deliver posts e until it is delivered, permanently refused, or
// MaxAttempts fail; it returns early (ok false) only when ctx ends. An
// answer that came back counts even if ctx ended meanwhile, so a stop right
// after a 2xx does not send the event again.
func (o *output) deliver(ctx context.Context, e redislayout.Entry) (out outcome, ok bool) {
	for attempt := 1; ; attempt++ {
		r := o.post(ctx, e)
		v := classifyAttempt(r)
		if ctx.Err() != nil && v != delivered && v != permanent {
			return outcome{}, false
		}
		out = outcome{attempts: attempt, last: r}
		switch v {
		case delivered:
			out.delivered = true
			return out, true
		case permanent:
			out.reason = "permanent: HTTP " + strconv.Itoa(r.status)
			return out, true
		}
		if attempt >= o.hook.MaxAttempts {
			out.reason = "attempts exhausted: " + describe(r)
			return out, true
		}
		wait := jittered(o.cfg.Backoff, o.cfg.BackoffMax, attempt)
		if r.retryAfter > 0 {
			wait = min(r.retryAfter, o.cfg.RetryAfterMax)
		}
		o.m.retries.Inc()
		o.log.Debug("webhook attempt failed", "outbox_id", e.ID, "attempt", attempt, "result", describe(r), "retry_in", wait)
		if !sleep(ctx, wait) {
			return outcome{}, false
		}
	}
}

func describe(r attemptResult) string {
	if r.err != nil {
		return r.err.Error()
	}
	return "HTTP " + strconv.Itoa(r.status)
}

// runWebhook drains the outbox into one webhook until ctx ends, one entry at
// a time in stream order, persisting its cursor after each entry.
func (o *output) runWebhook(ctx context.Context) {
	after := ""
	failures := 0
	fail := func(msg string, err error) {
		failures++
		o.m.errors.Inc()
		d := jittered(o.cfg.Backoff, o.cfg.BackoffMax, failures)
		o.log.Error(msg, "error", err, "attempt", failures, "retry_in", d)
		sleep(ctx, d)
	}
	for ctx.Err() == nil {
		if after == "" {
			cur, err := o.rdb.Get(ctx, o.keys.Cursor(o.name)).Result()
			switch {
			case errors.Is(err, redis.Nil):
				cur = redislayout.StartID
			case err != nil:
				if ctx.Err() == nil {
					fail("webhook output: read cursor", err)
				}
				continue
			}
			after = cur
			o.prog.restart(after)
			o.log.Info("webhook output resumes", "after", after)
		}
		entries, err := redislayout.ReadOutbox(ctx, o.rdb, o.keys, after, o.cfg.BatchSize, o.cfg.Block)
		if err != nil {
			if ctx.Err() == nil {
				fail("webhook output: read outbox", err)
			}
			continue
		}
		if err := o.confirm(ctx, entries); err != nil {
			if ctx.Err() == nil {
				fail("webhook output: outbox entries not yet on enough Redis replicas; holding them", err)
			}
			continue
		}
		failures = 0
		for _, e := range entries {
			out, ok := o.deliver(ctx, e)
			if !ok {
				return
			}
			var dead []any
			if !out.delivered {
				dead = redislayout.DeadLetter{Entry: e, Reason: out.reason, Attempts: out.attempts, Status: out.last.status}.Values()
			}
			// The cursor (and dead letter) must be stored before moving on:
			// retry until it is, or until ctx ends (then the entry is sent
			// again on restart: at least once). A stop does not cut the
			// first try short: the endpoint has answered already.
			for try := 0; ; try++ {
				actx, cancel := ctx, context.CancelFunc(func() {})
				if try == 0 {
					actx, cancel = context.WithTimeout(context.WithoutCancel(ctx), o.hook.Timeout)
				}
				err := advance(actx, o.rdb, o.keys, o.name, e.ID, dead)
				cancel()
				if err == nil {
					break
				}
				if ctx.Err() != nil {
					return
				}
				fail("webhook output: save cursor", err)
			}
			failures = 0
			after = e.ID
			o.prog.add(1)
			if out.delivered {
				o.m.delivered.Inc()
			} else {
				o.m.deadLetters.Inc()
				o.log.Warn("webhook output: event dead-lettered", "outbox_id", e.ID, "event_id", e.EventID,
					"reason", out.reason, "attempts", out.attempts)
			}
		}
	}
}
