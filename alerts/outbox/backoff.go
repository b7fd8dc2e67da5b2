package outbox

import (
	"context"
	"math/rand/v2"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// backoff is the pause before attempt+1 after attempt failed (attempt >= 1):
// base doubled per attempt, capped at max, then drawn in [d/2, d] by r in
// [0, 1) so that outputs do not retry in step.
func backoff(base, max time.Duration, attempt int, r float64) time.Duration {
	if attempt < 1 {
		attempt = 1
	}
	d := base << min(attempt-1, 30)
	if d > max || d <= 0 {
		d = max
	}
	return d/2 + time.Duration(r*float64(d/2))
}

// jittered is backoff with a random draw.
func jittered(base, max time.Duration, attempt int) time.Duration {
	return backoff(base, max, attempt, rand.Float64())
}

// retryAfter parses a Retry-After header: delay-seconds or an HTTP date,
// relative to now. It returns 0 when the header is absent or unreadable.
func retryAfter(h string, now time.Time) time.Duration {
	h = strings.TrimSpace(h)
	if h == "" {
		return 0
	}
	if s, err := strconv.ParseInt(h, 10, 64); err == nil {
		if s <= 0 {
			return 0
		}
		return time.Duration(min(s, int64(24*time.Hour/time.Second))) * time.Second
	}
	if t, err := http.ParseTime(h); err == nil {
		if d := t.Sub(now); d > 0 {
			return d
		}
	}
	return 0
}

// sleep waits d or until ctx ends; it reports whether d passed.
func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}
