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
		want    int
		wantErr error
	}{
		{"full batch", 10, 5, time.Second, 5, nil},
		{"linger ends a short batch", 3, 5, 10 * time.Millisecond, 3, nil},
		{"batch of one does not linger", 3, 1, time.Hour, 1, nil},
		{"nothing until ctx ends", 0, 5, time.Millisecond, 0, context.DeadlineExceeded},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
			defer cancel()
			got, err := fetchBatch(ctx, &fakeFetcher{msgs: msgs(tc.queued)}, nil, tc.n, tc.linger)
			if !errors.Is(err, tc.wantErr) || len(got) != tc.want {
				t.Fatalf("got %d records, err %v; want %d, %v", len(got), err, tc.want, tc.wantErr)
			}
			for i, r := range got {
				if r.Offset != int64(i) || !bytes.Equal(r.Value, []byte{byte(i)}) {
					t.Fatalf("record %d = %+v", i, r)
				}
			}
		})
	}
}
