package alerterd

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/nofly-dev/nofly/internal/redislayout"
	"github.com/nofly-dev/nofly/internal/testenv"
)

// TestRedriveCommand: alerter redrive posts every partition's dead letters
// of one webhook to the given URL and empties those streams, against the
// real Redis; --dry-run only counts; bad usage exits 2 naming the flag.
func TestRedriveCommand(t *testing.T) {
	raddr := testenv.Redis(t)
	rdb := redis.NewClient(&redis.Options{Addr: raddr})
	t.Cleanup(func() { rdb.Close() })
	ctx := context.Background()
	prefix := testenv.RedisPrefix(t, "redrive")
	dead := func(p int) string {
		return redislayout.Of(prefix, "telemetry.positions", p).Dead(redislayout.WebhookOutput("ops"))
	}
	t.Cleanup(func() { rdb.Del(ctx, dead(0), dead(1), dead(2)) })
	want := map[string]string{}
	for _, p := range []int{0, 2} {
		for i := range 3 {
			id := fmt.Sprintf("ev-%d-%d", p, i)
			body := fmt.Sprintf(`{"event_id":%q,"drone_id":"UAV-1"}`, id)
			want[id] = body
			if err := rdb.XAdd(ctx, &redis.XAddArgs{Stream: dead(p), Values: redislayout.DeadLetter{
				Entry: redislayout.Entry{ID: "1-0", EventID: id, Event: []byte(body)}, Reason: "permanent: HTTP 400", Attempts: 1, Status: 400,
			}.Values()}).Err(); err != nil {
				t.Fatal(err)
			}
		}
	}
	var mu sync.Mutex
	got := map[string]string{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		got[r.Header.Get("Idempotency-Key")] = string(b)
		mu.Unlock()
		w.WriteHeader(http.StatusAccepted)
	}))
	t.Cleanup(srv.Close)
	base := []string{"redrive", "--redis", raddr, "--redis-prefix", prefix, "--partitions", "3", "--webhook", "ops=" + srv.URL}

	cases := []struct {
		name     string
		args     []string
		code     int
		stdout   []string
		stderr   string
		posted   int
		deadLeft int64
	}{
		{"no webhook", []string{"redrive", "--redis", raddr}, 2, nil, "--webhook NAME=URL is required", 0, 6},
		{"bad url", []string{"redrive", "--redis", raddr, "--webhook", "ops=ftp://x"}, 2, nil, "URL", 0, 6},
		{"dry run", append(base, "--dry-run"), 0, []string{"partition 0: 3 dead letters, 0 redelivered", "partition 2: 3 dead letters, 0 redelivered",
			"webhook ops: 6 dead letters in 3 partitions, 0 redelivered"}, "", 0, 6},
		{"redrive", base, 0, []string{"partition 0: 3 dead letters, 3 redelivered", "webhook ops: 6 dead letters in 3 partitions, 6 redelivered"}, "", 6, 0},
		{"nothing left", base, 0, []string{"webhook ops: 0 dead letters in 3 partitions, 0 redelivered"}, "", 6, 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			if code := run(ctx, tc.args, func(string) string { return "" }, &stdout, &stderr); code != tc.code {
				t.Fatalf("exit %d, want %d; stderr %s", code, tc.code, stderr.String())
			}
			for _, line := range tc.stdout {
				if !strings.Contains(stdout.String(), line) {
					t.Errorf("stdout %q lacks %q", stdout.String(), line)
				}
			}
			if !strings.Contains(stderr.String(), tc.stderr) {
				t.Errorf("stderr %q lacks %q", stderr.String(), tc.stderr)
			}
			mu.Lock()
			n := len(got)
			mu.Unlock()
			if n != tc.posted {
				t.Errorf("%d events posted so far, want %d", n, tc.posted)
			}
			left := rdb.XLen(ctx, dead(0)).Val() + rdb.XLen(ctx, dead(2)).Val()
			if left != tc.deadLeft {
				t.Errorf("%d dead letters left, want %d", left, tc.deadLeft)
			}
		})
	}
	for id, body := range want {
		if got[id] != body {
			t.Errorf("event %s posted as %q, want %q", id, got[id], body)
		}
	}
}
