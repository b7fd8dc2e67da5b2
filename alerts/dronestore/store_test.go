package dronestore_test

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/nofly-dev/nofly/alerts"
	"github.com/nofly-dev/nofly/alerts/dronestore"
	"github.com/nofly-dev/nofly/alerts/dronestore/dronetest"
	"github.com/nofly-dev/nofly/dedup"
	"github.com/nofly-dev/nofly/geofence"
	"github.com/nofly-dev/nofly/internal/testenv"
	"github.com/nofly-dev/nofly/telemetry"
)

var base = time.Date(2026, 12, 2, 9, 0, 0, 0, time.UTC)

// env is a store over a test's own keys on the real Redis, 3 partitions,
// with drones flown through the real engine and batch script:
//
//	OUT  p0: 30 positions 1 s apart outside every zone (seq 1..30)
//	IN   p1: 3 positions inside POLY (an active alarm raised at seq 1)
//	MOVE p0 seq 1..5 inside POLY, then p1 seq 6..9 outside: repartitioned
//	LONG p2: 60 positions 10 s apart (the track keeps the last 50)
//	OLD  p2: a state written before states kept a position, {"seq":7}
//	OLDA p2: the same with an active alarm whose id the state does not hold
type env struct {
	st      *dronestore.Store
	ds      *dedup.Redis
	zones   *geofence.Index
	inAlarm alerts.Event // IN's raise
}

func newEnv(t *testing.T) *env {
	t.Helper()
	ctx := context.Background()
	rdb := testenv.RedisClient(t)
	prefix := testenv.RedisPrefix(t, "dronestore")
	ds, err := dedup.NewRedis(rdb, dedup.RedisOptions{Prefix: prefix, Topic: "pos"})
	if err != nil {
		t.Fatal(err)
	}
	zs, err := dronetest.Zones()
	if err != nil {
		t.Fatal(err)
	}
	st, err := dronestore.New(dronestore.Options{Redis: rdb, Prefix: prefix, Topic: "pos", Partitions: 3})
	if err != nil {
		t.Fatal(err)
	}
	e := &env{st: st, ds: ds, zones: zs}
	fly := func(p int, ps ...telemetry.Position) []alerts.Event {
		t.Helper()
		evs, err := dronetest.Fly(ctx, ds, zs, p, ps...)
		if err != nil {
			t.Fatal(err)
		}
		return evs
	}
	var ps []telemetry.Position
	for i := range 30 {
		ps = append(ps, dronetest.Pos("OUT", int64(i+1), base.Add(time.Duration(i)*time.Second), dronetest.OutsideLat, dronetest.OutsideLon+float64(i)*1e-4))
	}
	for i := range 5 {
		ps = append(ps, dronetest.Pos("MOVE", int64(i+1), base.Add(time.Duration(i)*time.Second), dronetest.InsideLat, dronetest.InsideLon))
	}
	fly(0, ps...)
	evs := fly(1, dronetest.Pos("IN", 1, base.Add(time.Minute), dronetest.InsideLat, dronetest.InsideLon),
		dronetest.Pos("IN", 2, base.Add(time.Minute+time.Second), dronetest.InsideLat, dronetest.InsideLon),
		dronetest.Pos("IN", 3, base.Add(time.Minute+2*time.Second), dronetest.InsideLat, dronetest.InsideLon))
	if len(evs) != 1 || evs[0].Type != alerts.Raised || evs[0].ZoneID != "POLY" {
		t.Fatalf("IN's events = %+v, want POLY raised", evs)
	}
	e.inAlarm = evs[0]
	fly(1, dronetest.Pos("MOVE", 6, base.Add(10*time.Second), dronetest.OutsideLat, dronetest.OutsideLon),
		dronetest.Pos("MOVE", 9, base.Add(13*time.Second), dronetest.OutsideLat, dronetest.OutsideLon))
	ps = ps[:0]
	for i := range 60 {
		ps = append(ps, dronetest.Pos("LONG", int64(i+1), base.Add(time.Duration(i)*10*time.Second), dronetest.OutsideLat+float64(i)*1e-3, dronetest.OutsideLon))
	}
	// One batch per position: a batch keeps one track point per drone at
	// most (its latest sample), so 60 batches give 60 samples.
	for _, p := range ps {
		fly(2, p)
	}
	if err := dronetest.Legacy(ctx, ds, 2, map[string]string{
		"OLD":  `{"seq":7}`,
		"OLDA": `{"seq":9,"in":[{"zone":"POLY","alarm":"","fp":"f","rseq":4}]}`,
	}); err != nil {
		t.Fatal(err)
	}
	return e
}

func ids(ds []dronestore.Drone) []string {
	var out []string
	for _, d := range ds {
		out = append(out, d.DroneID)
	}
	return out
}

func TestList(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	all := []string{"IN", "LONG", "MOVE", "OLD", "OLDA", "OUT"}
	tests := []struct {
		name string
		f    dronestore.Filter
		want []string
	}{
		{"all, legacy states included", dronestore.Filter{}, all},
		{"bbox around POLY: MOVE's newer state is outside", dronestore.Filter{BBox: &dronestore.BBox{MinLon: -0.5, MinLat: 51.46, MaxLon: -0.48, MaxLat: 51.5}}, []string{"IN"}},
		{"bbox edges included", dronestore.Filter{BBox: &dronestore.BBox{MinLon: -0.49, MinLat: 51.47, MaxLon: -0.49, MaxLat: 51.47}}, []string{"IN"}},
		{"bbox of the world drops unknown positions only", dronestore.Filter{BBox: &dronestore.BBox{MinLon: -180, MinLat: -90, MaxLon: 180, MaxLat: 90}}, []string{"IN", "LONG", "MOVE", "OUT"}},
		{"active since IN's last ts", dronestore.Filter{ActiveSince: base.Add(time.Minute + 2*time.Second)}, []string{"IN", "LONG"}},
		{"active since after IN's last ts", dronestore.Filter{ActiveSince: base.Add(time.Minute + 2*time.Second + time.Millisecond)}, []string{"LONG"}},
		{"active since, far past", dronestore.Filter{ActiveSince: base.Add(-time.Hour)}, []string{"IN", "LONG", "MOVE", "OUT"}},
		{"limit", dronestore.Filter{Limit: 2}, all[:2]},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ds, _, err := e.st.List(ctx, tt.f)
			if err != nil {
				t.Fatal(err)
			}
			if got := ids(ds); !slices.Equal(got, tt.want) {
				t.Errorf("drones %q, want %q", got, tt.want)
			}
		})
	}
}

func TestListFields(t *testing.T) {
	e := newEnv(t)
	ds, next, err := e.st.List(context.Background(), dronestore.Filter{})
	if err != nil || next != "" {
		t.Fatalf("List: next %q, %v", next, err)
	}
	by := map[string]dronestore.Drone{}
	for _, d := range ds {
		by[d.DroneID] = d
	}
	in := by["IN"]
	if in.Partition != 1 || in.Seq != 3 || in.TS == nil || !in.TS.Equal(base.Add(time.Minute+2*time.Second)) ||
		*in.Lat != dronetest.InsideLat || *in.Lon != dronetest.InsideLon || in.AltM == nil || *in.AltM != 80 || in.AltRef == nil || *in.AltRef != telemetry.RefAGL {
		t.Errorf("IN = %+v", in)
	}
	if len(in.ActiveAlarms) != 1 {
		t.Fatalf("IN's alarms = %+v", in.ActiveAlarms)
	}
	a := in.ActiveAlarms[0]
	if a.AlarmID != e.inAlarm.AlarmID || a.AlarmID != alerts.AlarmID("IN", "POLY", 1) || a.ZoneID != "POLY" || a.ZoneName != e.inAlarm.ZoneName ||
		a.Category != "restricted" || a.RaisedSeq != 1 || a.Since == nil || !a.Since.Equal(base.Add(time.Minute)) {
		t.Errorf("IN's alarm = %+v (since %v), want %+v", a, a.Since, e.inAlarm)
	}
	if m := by["MOVE"]; m.Partition != 1 || m.Seq != 9 || *m.Lat != dronetest.OutsideLat || len(m.ActiveAlarms) != 0 {
		t.Errorf("MOVE = %+v, want partition 1's state at seq 9 (the higher seq)", m)
	}
	if o := by["OLD"]; o.Seq != 7 || o.Partition != 2 || o.TS != nil || o.Lat != nil || o.Lon != nil || o.AltM != nil || o.AltRef != nil || o.ActiveAlarms == nil {
		t.Errorf("OLD = %+v, want seq 7 with null position and no alarms", o)
	}
	oa := by["OLDA"]
	if len(oa.ActiveAlarms) != 1 || oa.ActiveAlarms[0].AlarmID != alerts.AlarmID("OLDA", "POLY", 4) || oa.ActiveAlarms[0].Since != nil {
		t.Errorf("OLDA's alarms = %+v, want the id computed from (OLDA, POLY, 4) and no since", oa.ActiveAlarms)
	}
}

// TestListPages walks 25 more drones in pages of 7: each drone once, in
// order, and a drone added between pages after the cursor shows up.
func TestListPages(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	var ps []telemetry.Position
	var want []string
	for i := range 25 {
		id := fmt.Sprintf("P%02d", i)
		ps = append(ps, dronetest.Pos(id, 1, base, dronetest.OutsideLat, dronetest.OutsideLon))
	}
	for p := range 3 {
		if _, err := dronetest.Fly(ctx, e.ds, e.zones, p, ps[p*9:min(len(ps), p*9+9)]...); err != nil {
			t.Fatal(err)
		}
	}
	want = []string{"IN", "LONG", "MOVE", "OLD", "OLDA", "OUT"}
	for _, p := range ps {
		want = append(want, p.DroneID)
	}
	want = append(want, "Q")
	slices.Sort(want)
	var got []string
	f := dronestore.Filter{Limit: 7}
	for page := 0; ; page++ {
		ds, next, err := e.st.List(ctx, f)
		if err != nil {
			t.Fatal(err)
		}
		if len(ds) > 7 {
			t.Fatalf("page %d has %d drones", page, len(ds))
		}
		got = append(got, ids(ds)...)
		if page == 1 {
			if _, err := dronetest.Fly(ctx, e.ds, e.zones, 0, dronetest.Pos("Q", 1, base, dronetest.OutsideLat, dronetest.OutsideLon)); err != nil {
				t.Fatal(err)
			}
		}
		if next == "" {
			break
		}
		if page > 10 {
			t.Fatal("more than 10 pages")
		}
		f.Cursor = next
	}
	if !slices.Equal(got, want) {
		t.Errorf("pages gave %q\nwant %q", got, want)
	}
}

func TestListBadInput(t *testing.T) {
	e := newEnv(t)
	for _, tt := range []struct {
		name string
		f    dronestore.Filter
		want error
	}{
		{"not base64", dronestore.Filter{Cursor: "!!"}, dronestore.ErrBadCursor},
		{"another list's cursor", dronestore.Filter{Cursor: "MTc2NDY2OTYwMDAwMCAwMTIz"}, dronestore.ErrBadCursor},
		{"empty id", dronestore.Filter{Cursor: "ZA"}, dronestore.ErrBadCursor},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if _, _, err := e.st.List(context.Background(), tt.f); !errors.Is(err, tt.want) {
				t.Errorf("err %v, want %v", err, tt.want)
			}
		})
	}
	if _, _, err := e.st.List(context.Background(), dronestore.Filter{BBox: &dronestore.BBox{MinLon: 1, MaxLon: 0}}); err == nil {
		t.Error("a box with minLon above maxLon was taken")
	}
}

func TestBBoxCheck(t *testing.T) {
	for _, tt := range []struct {
		b  dronestore.BBox
		ok bool
	}{
		{dronestore.BBox{MinLon: -180, MinLat: -90, MaxLon: 180, MaxLat: 90}, true},
		{dronestore.BBox{MinLon: 1, MinLat: 2, MaxLon: 1, MaxLat: 2}, true},
		{dronestore.BBox{MinLon: -181, MaxLon: 0}, false},
		{dronestore.BBox{MinLon: 0, MaxLon: 180.5}, false},
		{dronestore.BBox{MinLat: -91}, false},
		{dronestore.BBox{MaxLat: 90.1}, false},
		{dronestore.BBox{MinLon: 10, MaxLon: -10}, false},
		{dronestore.BBox{MinLat: 10, MaxLat: -10}, false},
	} {
		if err := tt.b.Check(); (err == nil) != tt.ok {
			t.Errorf("%+v: Check() = %v, want ok %v", tt.b, err, tt.ok)
		}
	}
}

func TestGet(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	tests := []struct {
		id    string
		seq   int64
		part  int
		track int
	}{
		{"OUT", 30, 0, 1},   // samples at ts 0, 10, 20 s in one batch: its latest kept
		{"LONG", 60, 2, 50}, // 60 samples, the last 50 kept
		{"MOVE", 9, 1, 1},   // partition 1's track, beside the chosen state (p0 has one too)
		{"IN", 3, 1, 1},
		{"OLD", 7, 2, 0}, // a legacy state: no track
	}
	for _, tt := range tests {
		t.Run(tt.id, func(t *testing.T) {
			d, err := e.st.Get(ctx, tt.id)
			if err != nil {
				t.Fatal(err)
			}
			if d.DroneID != tt.id || d.Seq != tt.seq || d.Partition != tt.part {
				t.Errorf("drone %s seq %d partition %d, want %s %d %d", d.DroneID, d.Seq, d.Partition, tt.id, tt.seq, tt.part)
			}
			if d.Track == nil || len(d.Track) > 50 {
				t.Fatalf("track of %d points", len(d.Track))
			}
			if len(d.Track) != tt.track {
				t.Fatalf("track of %d points, want %d: %+v", len(d.Track), tt.track, d.Track)
			}
			for i := 1; i < len(d.Track); i++ {
				if !d.Track[i].TS.After(d.Track[i-1].TS) {
					t.Errorf("track point %d at %v is not after %v: want oldest first", i, d.Track[i].TS, d.Track[i-1].TS)
				}
			}
			if tt.id == "MOVE" && !d.Track[0].TS.Equal(base.Add(10*time.Second)) {
				t.Errorf("MOVE's track %+v, want partition 1's point at 10 s", d.Track)
			}
			if tt.id == "LONG" {
				last := d.Track[len(d.Track)-1]
				if !d.Track[0].TS.Equal(base.Add(100*time.Second)) || !last.TS.Equal(base.Add(590*time.Second)) ||
					last.Lat != *d.Lat || last.AltM == nil || *last.AltM != 80 || last.AltRef == nil || *last.AltRef != telemetry.RefAGL {
					t.Errorf("LONG's track runs %+v .. %+v, want ts 100 s .. 590 s ending at the last position", d.Track[0], last)
				}
			}
		})
	}
	for _, id := range []string{"NOPE", "", string(make([]byte, 65))} {
		if _, err := e.st.Get(ctx, id); !errors.Is(err, dronestore.ErrNotFound) {
			t.Errorf("Get(%q): %v, want ErrNotFound", id, err)
		}
	}
}

// TestActive: Active answers what List answers with only ActiveSince set,
// and besides every drone with an active alarm however old its position
// (the map keeps drawing it), every page at once: the better state of a
// drone on two partitions (MOVE's newer one, then the window), no legacy
// state without a position.
func TestActive(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	all, _, err := e.st.List(ctx, dronestore.Filter{Limit: dronestore.MaxLimit})
	if err != nil {
		t.Fatal(err)
	}
	for _, since := range []time.Time{base.Add(-time.Hour), base, base.Add(12 * time.Second), base.Add(time.Minute + 2*time.Second), base.Add(time.Hour)} {
		var list []dronestore.Drone
		for _, d := range all {
			if d.TS != nil && (!d.TS.Before(since) || len(d.ActiveAlarms) > 0) {
				list = append(list, d)
			}
		}
		act, err := e.st.Active(ctx, since)
		if err != nil {
			t.Fatal(err)
		}
		// A Scanner's second pass, from its memory of the first, is the same.
		sc := e.st.Scanner()
		if _, err := sc.Active(ctx, since); err != nil {
			t.Fatal(err)
		}
		again, err := sc.Active(ctx, since)
		if err != nil {
			t.Fatal(err)
		}
		if len(again) != len(act) {
			t.Errorf("since %v: a Scanner's second pass has %d drones, the first %d", since, len(again), len(act))
		}
		slices.SortFunc(act, func(a, b dronestore.Drone) int { return cmp.Compare(a.DroneID, b.DroneID) })
		if since.Equal(base.Add(-time.Hour)) && len(act) != 4 {
			t.Errorf("since an hour before: %q, want IN, LONG, MOVE and OUT", ids(act))
		}
		if !slices.Equal(ids(act), ids(list)) {
			t.Errorf("since %v: Active %q, List %q", since, ids(act), ids(list))
		}
		for i := range act {
			if act[i].Seq != list[i].Seq || act[i].Partition != list[i].Partition || !act[i].TS.Equal(*list[i].TS) {
				t.Errorf("since %v: %s: Active %+v, List %+v", since, act[i].DroneID, act[i], list[i])
			}
		}
	}
}
