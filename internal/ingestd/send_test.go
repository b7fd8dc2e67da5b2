package ingestd

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nofly-dev/nofly/internal/testenv"
	"github.com/nofly-dev/nofly/telemetry"
)

func TestReadTrack(t *testing.T) {
	good := string(ndjsonBody([]telemetry.Position{position("A", 1)}))
	tests := []struct {
		name        string
		data        string
		want        int
		wantErr     []string
		wantDropped []string
	}{
		{"sample track", "", 449, nil, nil},
		{"blank lines", "\n" + good + "\n\n" + good, 2, nil, nil},
		{"bad lines named with file and line", good + "\n" + `{"drone_id":"A","seq":1}` + "\n" + good + `{"lat":1}` + "\n",
			0, []string{"2 invalid line(s), nothing sent", "t.ndjson:3: ts: required", "t.ndjson:5: drone_id: required"}, nil},
		{"empty", "\n\n", 0, []string{"no records"}, nil},
		{"BOM at the start", "\uFEFF" + good, 1, nil, nil},
		{"optional field dropped, record kept", good + `{"drone_id":"A","seq":2,"ts":"2026-12-02T10:15:00Z","lat":1,"lon":2,"heading_deg":1000}` + "\n",
			2, nil, []string{"t.ndjson:2: heading_deg: 1000 is outside [-360, 360] (361: unknown); dropped"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			data := []byte(tt.data)
			name := "t.ndjson"
			if tt.data == "" {
				name = filepath.Join(testenv.RepoRoot(), "testdata", "tracks", "heathrow.ndjson")
				var err error
				if data, err = os.ReadFile(name); err != nil {
					t.Fatal(err)
				}
			}
			recs, dropped, err := readTrack(name, data)
			if tt.wantErr != nil {
				if err == nil {
					t.Fatal("no error")
				}
				for _, w := range tt.wantErr {
					if !strings.Contains(err.Error(), w) {
						t.Errorf("error %q lacks %q", err, w)
					}
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(recs) != tt.want {
				t.Fatalf("%d records, want %d", len(recs), tt.want)
			}
			for _, r := range recs {
				// Time zero: the producer stamps the time of sending, never ts.
				if r.Partition != -1 || len(r.Key) == 0 || !r.Time.IsZero() {
					t.Fatalf("record %+v", r)
				}
			}
			if fmt.Sprint(dropped) != fmt.Sprint(tt.wantDropped) {
				t.Errorf("dropped %q, want %q", dropped, tt.wantDropped)
			}
		})
	}
}

// TestSendTrack sends the sample track to the real broker and reads it back
// in file order per drone.
func TestSendTrack(t *testing.T) {
	brokers := testenv.Kafka(t)
	topic := testenv.CreateTopic(t, brokers, 3)
	file := filepath.Join(testenv.RepoRoot(), "testdata", "tracks", "heathrow.ndjson")
	var out, errOut bytes.Buffer
	code := run(context.Background(), []string{"send", "--file", file, "--rate", "2000", "--topic", topic,
		"--partitions", "3", "--progress", "lines"},
		func(k string) string {
			if k == "NOFLY_KAFKA_BROKERS" {
				return strings.Join(brokers, ",")
			}
			return ""
		}, &out, &errOut)
	if code != 0 {
		t.Fatalf("exit %d: %s %s", code, out.String(), errOut.String())
	}
	if !strings.Contains(out.String(), "449 of 449 records acknowledged") {
		t.Errorf("summary %q", out.String())
	}
	msgs := readTopic(t, brokers, topic, 3)
	if len(msgs) != 449 {
		t.Fatalf("%d records in the topic, want 449", len(msgs))
	}
	last := map[string]int64{}
	for _, m := range msgs {
		p, err := telemetry.Decode(m.Value)
		if err != nil {
			t.Fatal(err)
		}
		if l, ok := last[p.DroneID]; ok && p.Seq != l+1 {
			t.Errorf("%s: seq %d after %d", p.DroneID, p.Seq, l)
		}
		last[p.DroneID] = p.Seq
	}
	if fmt.Sprint(len(last)) != "4" {
		t.Errorf("drones %v", last)
	}
}

// TestSendBadFileSendsNothing: a file with a bad line exits 1 naming it and
// produces nothing (the topic does not even need to exist).
func TestSendBadFileSendsNothing(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "bad.ndjson")
	body := string(ndjsonBody([]telemetry.Position{position("A", 1)})) + `{"drone_id":"A","seq":2,"ts":"x","lat":1,"lon":1}` + "\n"
	if err := os.WriteFile(file, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	var out, errOut bytes.Buffer
	code := run(context.Background(), []string{"send", "--file", file, "--brokers", "127.0.0.1:1"},
		func(string) string { return "" }, &out, &errOut)
	if code != 1 || !strings.Contains(errOut.String(), file+":2: ts: must be an RFC 3339") {
		t.Fatalf("exit %d, stderr %q", code, errOut.String())
	}
}
