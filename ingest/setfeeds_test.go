package ingest

import (
	"reflect"
	"strings"
	"testing"

	"github.com/nofly-dev/nofly/ingest/feedkey"
)

// TestSetFeeds: the next write after SetFeeds is checked against the new
// feeds: a removed feed's key gets 401, an added one's 202, a changed
// feed's prefixes apply; a feed whose rate did not change keeps its bucket
// (no fresh burst), one whose rate changed gets a new one. A server started
// without feeds refuses SetFeeds: its mode is fixed.
func TestSetFeeds(t *testing.T) {
	fp := &fakeProducer{}
	s, err := NewServer(Options{Producer: fp, Logger: slogDiscard(), Feeds: testFeeds(t)})
	if err != nil {
		t.Fatal(err)
	}
	const keyNew = "nofly_test-key-new-0123456789abcdefghijklmnopqrstu"
	write := func(key string, ids ...string) int {
		return sendReq(t, s, authReq{auth: "Bearer " + key, body: ndjsonOf(ids...)}).code
	}
	burst := make([]string, 10)
	for i := range burst {
		burst[i] = "R-1"
	}
	if c := write(keyRated, burst...); c != 202 {
		t.Fatalf("rated's burst: %d", c)
	}
	if c := write(keyAny, "OTHER-1"); c != 202 {
		t.Fatalf("any before: %d", c)
	}
	line := func(name, key, opts string) string {
		return (&feedkey.Feed{Name: name, Hash: feedkey.Hash(key)}).Line() + " " + opts + "\n"
	}
	next, err := feedkey.Parse("feeds.txt", strings.NewReader(
		line("uav-fleet", keyUAV, "prefixes=UAV-")+ // DRN- taken away
			line("rated", keyRated, "rate=10/m")+ // the same rate
			line("new", keyNew, "")))
	if err != nil {
		t.Fatal(err)
	}
	ch, err := s.SetFeeds(next)
	if err != nil {
		t.Fatal(err)
	}
	if want := (feedkey.Changes{Added: []string{"new"}, Removed: []string{"any"}, Changed: []string{"uav-fleet"}}); !reflect.DeepEqual(ch, want) {
		t.Errorf("changes %+v, want %+v", ch, want)
	}
	for _, c := range []struct {
		name string
		key  string
		id   string
		want int
	}{
		{"removed feed", keyAny, "OTHER-1", 401},
		{"added feed", keyNew, "OTHER-1", 202},
		{"changed prefixes", keyUAV, "DRN-1", 403},
		{"kept prefix", keyUAV, "UAV-1", 202},
		{"same rate keeps its spent bucket", keyRated, "R-1", 429},
	} {
		if got := write(c.key, c.id); got != c.want {
			t.Errorf("%s: %d, want %d", c.name, got, c.want)
		}
	}
	faster, err := feedkey.Parse("feeds.txt", strings.NewReader(line("rated", keyRated, "rate=20/m")))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.SetFeeds(faster); err != nil {
		t.Fatal(err)
	}
	if c := write(keyRated, "R-1"); c != 202 {
		t.Errorf("a new rate, a new bucket: %d", c)
	}

	open, err := NewServer(Options{Producer: fp, Logger: slogDiscard()})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := open.SetFeeds(next); err == nil {
		t.Error("SetFeeds on a server without feeds: no error")
	}
	if _, err := s.SetFeeds(nil); err == nil {
		t.Error("SetFeeds(nil): no error")
	}
}

// TestSetFeedsWhileWriting: writes racing with SetFeeds are each checked
// against one set: the key of a feed in both sets always passes. Run with
// -race.
func TestSetFeedsWhileWriting(t *testing.T) {
	s, err := NewServer(Options{Producer: &fakeProducer{}, Logger: slogDiscard(), Feeds: testFeeds(t)})
	if err != nil {
		t.Fatal(err)
	}
	line := (&feedkey.Feed{Name: "any", Hash: feedkey.Hash(keyAny)}).Line() + "\n"
	small, err := feedkey.Parse("feeds.txt", strings.NewReader(line))
	if err != nil {
		t.Fatal(err)
	}
	full := testFeeds(t)
	done := make(chan int)
	for range 3 {
		go func() {
			bad := 0
			for i := range 200 {
				if c := sendReq(t, s, authReq{auth: "Bearer " + keyAny, body: ndjsonOf("W-" + string(rune('a'+i%26)))}).code; c != 202 {
					bad++
				}
			}
			done <- bad
		}()
	}
	for i := range 500 {
		set := full
		if i%2 == 0 {
			set = small
		}
		if _, err := s.SetFeeds(set); err != nil {
			t.Fatal(err)
		}
	}
	for range 3 {
		if bad := <-done; bad > 0 {
			t.Errorf("%d writes of a feed in every set refused", bad)
		}
	}
}
