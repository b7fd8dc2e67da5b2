package alerterd

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nofly-dev/nofly/alerts/dronestore"
	"github.com/nofly-dev/nofly/ingest"
	"github.com/nofly-dev/nofly/internal/testenv"
	"github.com/nofly-dev/nofly/producer"
)

// TestHostileRecordsCannotSilenceADrone: the two probes, end to end
// on the real Kafka and Redis — records posted to a live ingest, decided by
// a live alerter. A drone that sent seq 2^63-1 still raises its next
// incursion; a drone reporting heights no aircraft can have (alt_m -1e300,
// agl_m 1e300) inside a 50-120 m band raises, its height taken as unknown.
// Controls that would stay silent if the fix were missing: a drone really
// above the band raises nothing, and the wild record's re-send and a stale
// re-send are still dropped.
func TestHostileRecordsCannotSilenceADrone(t *testing.T) {
	t.Parallel()
	brokers, raddr := testenv.Kafka(t), testenv.Redis(t)
	p := newPipeline(t, brokers, raddr, 2)
	p.startInProcess(p.config())

	ctx := context.Background()
	prod, err := producer.New(ctx, producer.Config{Brokers: brokers, Topic: p.topic, ClientID: "hostile-test"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = prod.Close(context.Background()) })
	in, err := ingest.NewServer(ingest.Options{Producer: prod})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(in)
	t.Cleanup(srv.Close)

	t0 := time.Now().UTC().Add(-time.Minute).Truncate(time.Second)
	at := func(s int) string { return t0.Add(time.Duration(s) * time.Second).Format(time.RFC3339) }
	const (
		outside = `"lat":51.55,"lon":-0.30`  // no zone
		inPOLY  = `"lat":51.47,"lon":-0.47`  // POLY, no vertical limits
		inBAND  = `"lat":51.435,"lon":-0.52` // BAND, 50-120 m AMSL
	)
	rec := func(drone string, seq int64, sec int, where, extra string) string {
		return fmt.Sprintf(`{"drone_id":%q,"seq":%d,"ts":%q,%s%s}`, drone, seq, at(sec), where, extra)
	}
	lines := []string{
		// WILD: a wild seq, then its counter goes on, into POLY.
		rec("WILD", 1, 0, outside, ""),
		rec("WILD", 1<<63-1, 1, outside, ""),
		rec("WILD", 2, 2, outside, ""),
		rec("WILD", 3, 3, inPOLY, ""),
		rec("WILD", 1<<63-1, 1, inPOLY, ""), // the wild record again: a duplicate
		rec("WILD", 1, 0, inPOLY, ""),       // stale
		// HIGH: heights outside any physical range over the band.
		rec("HIGH", 1, 0, outside, `,"alt_m":80`),
		rec("HIGH", 2, 1, inBAND, `,"alt_m":-1e300,"agl_m":1e300`),
		// OVER: really above the band: no alarm (the control).
		rec("OVER", 1, 0, inBAND, `,"alt_m":5000`),
	}
	res, err := http.Post(srv.URL+"/v1/telemetry", "application/x-ndjson", strings.NewReader(strings.Join(lines, "\n")))
	if err != nil {
		t.Fatal(err)
	}
	var body struct {
		Accepted int `json:"accepted"`
		Warnings []struct {
			Line  int    `json:"line"`
			Field string `json:"field"`
		} `json:"warnings"`
	}
	_ = json.NewDecoder(res.Body).Decode(&body)
	res.Body.Close()
	if res.StatusCode != http.StatusAccepted || body.Accepted != len(lines) {
		t.Fatalf("ingest answered %d, accepted %d of %d", res.StatusCode, body.Accepted, len(lines))
	}
	if len(body.Warnings) != 2 || body.Warnings[0].Line != 8 || body.Warnings[0].Field != "alt_m" || body.Warnings[1].Field != "agl_m" {
		t.Errorf("warnings %+v: want alt_m and agl_m of line 8 dropped", body.Warnings)
	}
	testenv.CheckFor(t, 60*time.Second, p.caughtUp)

	type ev struct {
		Type          string `json:"type"`
		DroneID       string `json:"drone_id"`
		ZoneID        string `json:"zone_id"`
		Seq           int64  `json:"seq"`
		HeightAssumed bool   `json:"height_assumed"`
	}
	var got []string
	for _, l := range p.outbox() {
		var e ev
		if err := json.Unmarshal(l, &e); err != nil {
			t.Fatal(err)
		}
		got = append(got, fmt.Sprintf("%s %s %s %d assumed=%v", e.Type, e.DroneID, e.ZoneID, e.Seq, e.HeightAssumed))
	}
	slices.Sort(got)
	want := []string{"raised HIGH BAND 2 assumed=true", "raised WILD POLY 3 assumed=false"}
	if !slices.Equal(got, want) {
		t.Fatalf("events %q, want %q", got, want)
	}

	ds, err := dronestore.New(dronestore.Options{Redis: p.rc, Prefix: p.prefix, Topic: p.topic, Partitions: p.partitions})
	if err != nil {
		t.Fatal(err)
	}
	high, err := ds.Get(ctx, "HIGH")
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(high.Dropped, []string{"alt_m", "agl_m"}) || high.AltM != nil {
		t.Errorf("HIGH on /v1/drones: dropped %v alt_m %v, want alt_m and agl_m dropped", high.Dropped, high.AltM)
	}
	wild, err := ds.Get(ctx, "WILD")
	if err != nil {
		t.Fatal(err)
	}
	if wild.SeqResets != 1 || wild.Seq != 3 {
		t.Errorf("WILD on /v1/drones: seq %d, seq_resets %d; want 3 and 1", wild.Seq, wild.SeqResets)
	}
}
