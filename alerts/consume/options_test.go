package consume

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/segmentio/kafka-go"

	"github.com/nofly-dev/nofly/geofence"
)

func validOptions(t *testing.T) Options {
	t.Helper()
	ix, err := geofence.NewIndex(nil)
	if err != nil {
		t.Fatal(err)
	}
	var zones geofence.Current
	zones.Store(ix)
	rc := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", MaxRetries: -1})
	t.Cleanup(func() { _ = rc.Close() })
	return Options{Brokers: []string{"127.0.0.1:9092"}, Topic: "t", Group: "g", Batch: 10, Redis: rc, Zones: &zones}
}

func TestOptionsValidate(t *testing.T) {
	retrying := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"}) // go-redis retries 3 times by default
	defer retrying.Close()
	tests := []struct {
		name string
		edit func(*Options)
		want string // "" is valid
	}{
		{"valid", func(*Options) {}, ""},
		{"linger 0 is valid", func(o *Options) { o.Linger = 0 }, ""},
		{"no brokers", func(o *Options) { o.Brokers = nil }, "Brokers is empty"},
		{"no topic", func(o *Options) { o.Topic = "" }, "Topic is empty"},
		{"no group", func(o *Options) { o.Group = "" }, "Group is empty"},
		{"batch 0", func(o *Options) { o.Batch = 0 }, "Batch is 0"},
		{"negative linger", func(o *Options) { o.Linger = -time.Millisecond }, "Linger"},
		{"negative session timeout", func(o *Options) { o.SessionTimeout = -1 }, "timeouts"},
		{"negative ttl", func(o *Options) { o.EventTTL = -1 }, "EventTTL"},
		{"no redis", func(o *Options) { o.Redis = nil }, "Redis is nil"},
		{"retrying redis", func(o *Options) { o.Redis = retrying }, "3 retries"},
		{"no zones", func(o *Options) { o.Zones = nil }, "Zones"},
		{"empty holder", func(o *Options) { o.Zones = &geofence.Current{} }, "Zones"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			o := validOptions(t)
			tc.edit(&o)
			err := o.Validate()
			if tc.want == "" {
				if err != nil {
					t.Fatalf("Validate = %v, want nil", err)
				}
				if _, err := New(o); err != nil {
					t.Fatalf("New = %v", err)
				}
				return
			}
			if !errors.Is(err, ErrOptions) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Validate = %v, want ErrOptions naming %q", err, tc.want)
			}
			if _, nerr := New(o); !errors.Is(nerr, ErrOptions) {
				t.Fatalf("New = %v, want the same refusal", nerr)
			}
		})
	}
}

// fakeFetcher hands out queued messages and then blocks until ctx ends.
type fakeFetcher struct{ msgs []kafka.Message }

func (f *fakeFetcher) FetchMessage(ctx context.Context) (kafka.Message, error) {
	if len(f.msgs) > 0 {
		m := f.msgs[0]
		f.msgs = f.msgs[1:]
		return m, nil
	}
	<-ctx.Done()
	return kafka.Message{}, ctx.Err()
}

func TestFetchBatch(t *testing.T) {
	msgs := func(n int) []kafka.Message {
		m := make([]kafka.Message, n)
		for i := range m {
			m[i] = kafka.Message{Offset: int64(i), Value: []byte{byte(i)}}
		}
		return m
	}
	tests := []struct {
		name    string
		queued  int
		n       int
		linger  time.Duration
		idle    time.Duration
		want    int
		wantErr error
		within  time.Duration // the batch comes back sooner than this
		busy    func() bool
	}{
		{"full batch", 10, 5, time.Second, 0, 5, nil, time.Second, nil},
		{"linger ends a short batch", 3, 5, 10 * time.Millisecond, 0, 3, nil, time.Second, nil},
		{"batch of one does not linger", 3, 1, time.Hour, 0, 1, nil, time.Second, nil},
		{"nothing until ctx ends", 0, 5, time.Millisecond, 0, 0, context.DeadlineExceeded, time.Second, nil},
		// The queued records are taken; then the pause ends the batch at
		// idle, long before linger.
		{"a pause ends it before linger", 3, 5, time.Hour, time.Millisecond, 3, nil, 100 * time.Millisecond, nil},
		{"idle past linger: linger ends it", 3, 5, 10 * time.Millisecond, time.Hour, 3, nil, 100 * time.Millisecond, nil},
		// The previous batch still commits: the pause does not end it,
		// linger does (the fake's records are all taken by then).
		{"a pause while the last batch commits", 3, 5, 30 * time.Millisecond, time.Millisecond, 3, nil, time.Second, func() bool { return true }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
			if tc.linger == time.Hour {
				ctx, cancel = context.WithTimeout(context.Background(), 10*time.Second)
			}
			defer cancel()
			began := time.Now()
			got, err := fetchBatch(ctx, &fakeFetcher{msgs: msgs(tc.queued)}, nil, tc.n, tc.linger, tc.idle, tc.busy)
			if !errors.Is(err, tc.wantErr) || len(got) != tc.want {
				t.Fatalf("got %d records, err %v; want %d, %v", len(got), err, tc.want, tc.wantErr)
			}
			took := time.Since(began)
			if took >= tc.within {
				t.Fatalf("took %v, want under %v", took, tc.within)
			}
			if tc.busy != nil && took < tc.linger {
				t.Fatalf("took %v: a pause ended the batch while the previous one committed (want linger, %v)", took, tc.linger)
			}
			for i, r := range got {
				if r.Offset != int64(i) || !bytes.Equal(r.Value, []byte{byte(i)}) {
					t.Fatalf("record %d = %+v", i, r)
				}
			}
		})
	}
}
