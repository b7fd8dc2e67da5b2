package fleet_test

import (
	"bytes"
	"math"
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/nofly-dev/nofly/alerts"
	"github.com/nofly-dev/nofly/geofence"
	"github.com/nofly-dev/nofly/internal/fleet"
	"github.com/nofly-dev/nofly/telemetry"
)

var start = time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)

// Bounds the fleet promises; the test allows the GNSS noise on top.
const (
	maxSpeed = 25.0 // m/s horizontal
	minSpeed = 5.0  // m/s: the slowest cruise or loiter
	maxClimb = 5.0  // m/s vertical
	noiseH   = 6.0  // metres two fixes' horizontal errors may differ by, at most
	noiseV   = 1.0  // metres two fixes' vertical errors may differ by, at most
)

// flown is a fleet's output: every record as sent, and each drone's
// distinct fixes in order.
type flown struct {
	info  map[string]fleet.DroneInfo
	recs  []telemetry.Position
	fixes map[string][]telemetry.Position
}

// fly steps a fleet and checks what holds record by record: seq rises by
// one per fix, ts by a second, a duplicate repeats the record just before.
func fly(t *testing.T, n int, seed uint64, o fleet.Options, steps int, dupRate float64) flown {
	t.Helper()
	f := fleet.New(n, seed, start, o)
	out := flown{info: map[string]fleet.DroneInfo{}, fixes: map[string][]telemetry.Position{}}
	for _, d := range f.Drones() {
		out.info[d.ID] = d
	}
	rng := rand.New(rand.NewPCG(seed, 99))
	for step := 1; step <= steps; step++ {
		recs := f.Step(rng, dupRate)
		if !f.Now().Equal(start.Add(time.Duration(step) * time.Second)) {
			t.Fatalf("step %d: Now() = %v", step, f.Now())
		}
		for i, p := range recs {
			fx := out.fixes[p.DroneID]
			switch {
			case len(fx) > 0 && p.Seq == fx[len(fx)-1].Seq:
				if i == 0 || !reflect.DeepEqual(p, recs[i-1]) {
					t.Fatalf("%s seq %d: sent again but not as a copy of the record just before", p.DroneID, p.Seq)
				}
				continue
			case p.Seq != int64(step):
				t.Fatalf("%s: seq %d at step %d (last %d)", p.DroneID, p.Seq, step, len(fx))
			case !p.TS.Equal(f.Now()):
				t.Fatalf("%s seq %d: ts %v, want %v", p.DroneID, p.Seq, p.TS, f.Now())
			}
			out.fixes[p.DroneID] = append(fx, p)
		}
		out.recs = append(out.recs, recs...)
	}
	if len(out.fixes) != n {
		t.Fatalf("%d drones sent fixes, want %d", len(out.fixes), n)
	}
	return out
}

// zones loads the project's zone set twice: always, every zone active at
// any time (a clear drone must keep out whenever it flies); and flat, also
// without floors and ceilings (the zones' 2-D footprints).
func zones(t *testing.T) (always, flat *geofence.Index) {
	t.Helper()
	build := func(flatten bool) *geofence.Index {
		set, err := geofence.LoadFile("../../testdata/zones/airports.geojson")
		if err != nil {
			t.Fatal(err)
		}
		for _, z := range set.Zones {
			z.ActiveFrom, z.ActiveUntil, z.Windows, z.Fingerprint = time.Time{}, time.Time{}, nil, ""
			if flatten {
				for i := range z.Volumes {
					z.Volumes[i].Floor, z.Volumes[i].Ceiling = nil, nil
				}
			}
		}
		ix, err := geofence.NewIndex(set)
		if err != nil {
			t.Fatal(err)
		}
		return ix
	}
	return build(false), build(true)
}

func distM(a, b *telemetry.Position) float64 {
	const r = 6378137.0
	dy := (b.Lat - a.Lat) * math.Pi / 180 * r
	dx := (b.Lon - a.Lon) * math.Pi / 180 * r * math.Cos(a.Lat*math.Pi/180)
	return math.Hypot(dx, dy)
}

func bearingDeg(a, b *telemetry.Position) float64 {
	dy := b.Lat - a.Lat
	dx := (b.Lon - a.Lon) * math.Cos(a.Lat*math.Pi/180)
	return math.Mod(math.Atan2(dx, dy)*180/math.Pi+360, 360)
}

// angleDiff is b - a in (-180, 180].
func angleDiff(a, b float64) float64 {
	d := math.Mod(b-a+540, 360) - 180
	if d == -180 {
		return 180
	}
	return d
}

func TestFleet(t *testing.T) {
	always, flat := zones(t)
	tests := []struct {
		name      string
		n         int
		seed      uint64
		o         fleet.Options
		steps     int
		stray     int // drones of kind Stray, HighStray expected
		high      int
		airports  []string // the sites' airports must be among these (nil: any)
		wantHighs bool     // a high stray must have flown above a ceiling
	}{
		{name: "default", n: 20, seed: 1, steps: 8000, stray: 4, high: 2, wantHighs: true},
		{name: "strays, half high", n: 16, seed: 2, o: fleet.Options{StrayShare: 1, HighShare: 0.5}, steps: 8000, stray: 8, high: 8, wantHighs: true},
		{name: "no strays near London", n: 8, seed: 3, o: fleet.Options{StrayShare: -1, Airports: []string{"EGLL", "EGKK"}},
			steps: 4000, airports: []string{"EGLL", "EGKK"}},
		{name: "high strays where there is no ceiling to fly over", n: 4, seed: 4, o: fleet.Options{StrayShare: 1, HighShare: 1, Airports: []string{"EDDF"}},
			steps: 6000, stray: 4, airports: []string{"EDDF"}},
		{name: "high strays over Zurich's runway zone", n: 3, seed: 5, o: fleet.Options{StrayShare: 1, HighShare: 1, Airports: []string{"LSZH"}},
			steps: 6000, high: 3, airports: []string{"LSZH"}, wantHighs: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out := fly(t, tt.n, tt.seed, tt.o, tt.steps, 0.05)
			if len(out.recs) <= tt.n*tt.steps {
				t.Errorf("no duplicates among %d records", len(out.recs))
			}
			kinds := map[fleet.Kind]int{}
			for _, d := range out.info {
				kinds[d.Kind]++
				if tt.airports != nil && !slices.Contains(tt.airports, d.Airport) {
					t.Errorf("%s: site near %s, want one of %v", d.ID, d.Airport, tt.airports)
				}
				ap := airport(t, d.Airport)
				if r := distM(&telemetry.Position{Lat: ap.Lat, Lon: ap.Lon}, &telemetry.Position{Lat: d.Lat, Lon: d.Lon}); r < 6_000 || r > 21_000 {
					t.Errorf("%s: site %.0f m from %s, want 6-21 km", d.ID, r, d.Airport)
				}
			}
			if kinds[fleet.Stray] != tt.stray || kinds[fleet.HighStray] != tt.high {
				t.Errorf("%d strays and %d high strays, want %d and %d", kinds[fleet.Stray], kinds[fleet.HighStray], tt.stray, tt.high)
			}
			t.Run("valid records", func(t *testing.T) { checkValid(t, out) })
			t.Run("motion", func(t *testing.T) { checkMotion(t, out) })
			t.Run("mission phases", func(t *testing.T) { checkPhases(t, out) })
			t.Run("zones", func(t *testing.T) { checkZones(t, out, always, flat, tt.wantHighs) })
		})
	}
}

func airport(t *testing.T, icao string) fleet.Airport {
	t.Helper()
	i := slices.IndexFunc(fleet.Airports, func(a fleet.Airport) bool { return a.ICAO == icao })
	if i < 0 {
		t.Fatalf("no airport %s", icao)
	}
	return fleet.Airports[i]
}

// checkValid: every record encodes, decodes back the same without a
// warning, as ingest would take it.
func checkValid(t *testing.T, out flown) {
	var warns []telemetry.FieldWarning
	for i := range out.recs {
		p := &out.recs[i]
		if p.AltM == nil || p.AGLM == nil || p.SpeedMPS == nil || p.HeadingDeg == nil {
			t.Fatalf("%s seq %d: a field is missing: %s", p.DroneID, p.Seq, p.AppendJSON(nil))
		}
		b := p.AppendJSON(nil)
		q, w, err := telemetry.DecodeWarn(b, warns[:0])
		if err != nil || len(w) > 0 {
			t.Fatalf("%s: %v %v", b, err, w)
		}
		if !bytes.Equal(q.AppendJSON(nil), b) {
			t.Fatalf("%s decodes as %s", b, q.AppendJSON(nil))
		}
	}
}

// checkMotion: nothing jumps; speeds, climb rates, headings and heights
// agree with the positions.
func checkMotion(t *testing.T, out flown) {
	for id, fx := range out.fixes {
		info := out.info[id]
		var maxSeen, maxClimbSeen float64
		for i := range fx {
			p := &fx[i]
			if d := *p.AltM - *p.AGLM - info.ElevM; math.Abs(d) > 0.051 {
				t.Fatalf("%s seq %d: alt_m %.1f - agl_m %.1f is not the site's ground %.1f", id, p.Seq, *p.AltM, *p.AGLM, info.ElevM)
			}
			if *p.AGLM < 0 || *p.SpeedMPS < 0 || *p.SpeedMPS > maxSpeed || *p.HeadingDeg < 0 || *p.HeadingDeg >= 360 {
				t.Fatalf("%s seq %d: out of range: %s", id, p.Seq, p.AppendJSON(nil))
			}
			maxSeen = math.Max(maxSeen, *p.SpeedMPS)
			if i == 0 {
				continue
			}
			a := &fx[i-1]
			d := distM(a, p)
			if d > maxSpeed+noiseH {
				t.Fatalf("%s seq %d: %.0f m from the fix before: a jump", id, p.Seq, d)
			}
			if mean := (*a.SpeedMPS + *p.SpeedMPS) / 2; math.Abs(d-mean) > 3.5 {
				t.Fatalf("%s seq %d: moved %.1f m in 1 s at %.1f then %.1f m/s", id, p.Seq, d, *a.SpeedMPS, *p.SpeedMPS)
			}
			climb := *p.AGLM - *a.AGLM
			if math.Abs(climb) > maxClimb+noiseV {
				t.Fatalf("%s seq %d: climbed %.1f m in 1 s", id, p.Seq, climb)
			}
			if *a.SpeedMPS == 0 && *p.SpeedMPS == 0 {
				maxClimbSeen = math.Max(maxClimbSeen, math.Abs(climb))
			}
			if d >= 8 && *a.SpeedMPS > 0 && *p.SpeedMPS > 0 {
				want := *a.HeadingDeg + angleDiff(*a.HeadingDeg, *p.HeadingDeg)/2
				if e := angleDiff(want, bearingDeg(a, p)); math.Abs(e) > 25 {
					t.Fatalf("%s seq %d: moved towards %.0f° heading %.0f° then %.0f°", id, p.Seq, bearingDeg(a, p), *a.HeadingDeg, *p.HeadingDeg)
				}
			}
		}
		if maxSeen < minSpeed {
			t.Errorf("%s: never faster than %.1f m/s", id, maxSeen)
		}
		if maxClimbSeen < 1 {
			t.Errorf("%s: never climbed or descended faster than %.1f m/s", id, maxClimbSeen)
		}
	}
}

// checkPhases: each drone flies at least one whole mission: on the ground,
// straight up, horizontally with a loiter (a turn of a full circle without
// stopping), back straight down to the ground, at its site.
func checkPhases(t *testing.T, out flown) {
	for id, fx := range out.fixes {
		info := out.info[id]
		site := telemetry.Position{Lat: info.Lat, Lon: info.Lon}
		const (
			waitGround = iota
			onGround
			climbing
			flying
			descending
		)
		state, top, turn, loitered, full := waitGround, 0.0, 0.0, false, false
		for i := range fx {
			p := &fx[i]
			agl, speed := *p.AGLM, *p.SpeedMPS
			ground := agl == 0 && speed == 0
			switch state {
			case waitGround:
				if ground {
					state = onGround
				}
			case onGround:
				if !ground {
					if d := distM(p, &site); d > 20 {
						t.Fatalf("%s seq %d: took off %.0f m from its site", id, p.Seq, d)
					}
					state, top, turn, loitered = climbing, agl, 0, false
				}
			case climbing:
				switch {
				case speed > 0 && top < 25:
					t.Fatalf("%s seq %d: moving at %.1f m/s at %.1f m after take-off", id, p.Seq, speed, agl)
				case speed > 0:
					state = flying
				case ground:
					t.Fatalf("%s seq %d: landed again right after take-off", id, p.Seq)
				}
				top = math.Max(top, agl)
			case flying:
				a := &fx[i-1]
				// A stop at a waypoint (speed 0, or a turn on the spot
				// between two fixes) ends a turn.
				if dh := angleDiff(*a.HeadingDeg, *p.HeadingDeg); speed > 0 && *a.SpeedMPS > 0 && math.Abs(dh) <= 30 {
					turn += dh
					loitered = loitered || math.Abs(turn) >= 355
				} else {
					turn = 0
				}
				if speed == 0 && agl < top-20 {
					state = descending
				}
				if ground {
					t.Fatalf("%s seq %d: landed without descending", id, p.Seq)
				}
			case descending:
				if speed > 0 {
					t.Fatalf("%s seq %d: moving at %.1f m/s while descending", id, p.Seq, speed)
				}
				if ground {
					if d := distM(p, &site); d > 20 {
						t.Fatalf("%s seq %d: landed %.0f m from its site", id, p.Seq, d)
					}
					if !loitered {
						t.Fatalf("%s seq %d: a mission without a loiter", id, p.Seq)
					}
					full = true
					state = onGround
				}
			}
		}
		if !full {
			t.Errorf("%s (%s): no whole mission in %d s", id, info.Kind, len(fx))
		}
	}
}

// checkZones runs each drone's fixes through the alerter's state machine
// over the project's zones: clear drones never enter one, strays enter one
// and leave it, high strays fly over a zone's footprint above its ceiling
// without alarming for it.
func checkZones(t *testing.T, out flown, always, flat *geofence.Index, wantHighs bool) {
	var hits, flatHits []geofence.Hit
	var events []alerts.Event
	highs := 0
	for id, fx := range out.fixes {
		info := out.info[id]
		var st alerts.DroneState
		var raised, exited []string
		above := map[string]bool{} // zones flown over above their ceiling
		for i := range fx {
			p := &fx[i]
			var ok bool
			events, hits, ok = alerts.Step(&st, p, always, hits, events[:0])
			if !ok {
				t.Fatalf("%s seq %d: the state machine took it as a duplicate", id, p.Seq)
			}
			for _, e := range events {
				switch {
				case e.Type == alerts.Raised:
					raised = append(raised, e.ZoneID)
				case e.Reason == alerts.ReasonExited:
					exited = append(exited, e.ZoneID)
				}
			}
			if info.Kind != fleet.HighStray {
				continue
			}
			flatHits = flat.Query(alerts.PointOf(p), flatHits)
			for _, h := range flatHits {
				if slices.ContainsFunc(hits, func(x geofence.Hit) bool { return x.Zone == h.Zone }) {
					continue
				}
				z, _ := always.Zone(h.Zone.ID) // flat's zones have no ceilings
				for _, v := range z.Volumes {
					if v.Ceiling == nil {
						continue
					}
					if height, ok := p.Height(v.Ceiling.Ref.String()); ok && height > v.Ceiling.M {
						above[h.Zone.ID] = true
					}
				}
			}
		}
		switch info.Kind {
		case fleet.Clear:
			if len(raised) > 0 {
				t.Errorf("%s (clear, near %s): raised %v", id, info.Airport, raised)
			}
		case fleet.Stray:
			if len(raised) == 0 {
				t.Errorf("%s (stray, near %s): entered no zone in %d s", id, info.Airport, len(fx))
			} else if !slices.Contains(exited, raised[0]) {
				t.Errorf("%s (stray, near %s): entered %s and never left it", id, info.Airport, raised[0])
			}
		case fleet.HighStray:
			if len(above) > 0 {
				highs++
			} else {
				t.Errorf("%s (high stray, near %s): never above a zone's ceiling", id, info.Airport)
			}
			for z := range above {
				if slices.Contains(raised, z) {
					t.Errorf("%s (high stray, near %s): %s alarmed", id, info.Airport, z)
				}
			}
			if len(raised) > 0 && !slices.Contains(exited, raised[0]) {
				t.Errorf("%s (high stray, near %s): entered %s and never left it", id, info.Airport, raised[0])
			}
		}
	}
	if wantHighs && highs == 0 {
		t.Errorf("no high stray flew above a ceiling")
	}
}

func TestDeterministic(t *testing.T) {
	run := func(seed uint64) ([]byte, []fleet.DroneInfo) {
		f := fleet.New(12, seed, start, fleet.Options{})
		rng := rand.New(rand.NewPCG(1, 2))
		var b []byte
		for range 600 {
			for _, p := range f.Step(rng, 0.1) {
				b = append(p.AppendJSON(b), '\n')
			}
		}
		return b, f.Drones()
	}
	a, ia := run(42)
	b, ib := run(42)
	if !bytes.Equal(a, b) || !reflect.DeepEqual(ia, ib) {
		t.Fatal("the same seed flew two different fleets")
	}
	if c, _ := run(43); bytes.Equal(a, c) {
		t.Fatal("seeds 42 and 43 flew the same fleet")
	}
}

func TestShares(t *testing.T) {
	tests := []struct {
		name        string
		n           int
		o           fleet.Options
		stray, high int
	}{
		{"defaults", 10, fleet.Options{}, 2, 1},
		{"no strays", 10, fleet.Options{StrayShare: -1}, 0, 0},
		{"all strays, none high", 10, fleet.Options{StrayShare: 1, HighShare: -1}, 10, 0},
		{"shares above 1 are all", 5, fleet.Options{StrayShare: 3, HighShare: 2}, 0, 5},
		{"no ceiling at Frankfurt", 4, fleet.Options{StrayShare: 1, HighShare: 1, Airports: []string{"EDDF"}}, 4, 0},
		{"none", 0, fleet.Options{}, 0, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := fleet.New(tt.n, 7, start, tt.o)
			got := map[fleet.Kind]int{}
			for _, d := range f.Drones() {
				got[d.Kind]++
			}
			if len(f.Drones()) != tt.n || got[fleet.Stray] != tt.stray || got[fleet.HighStray] != tt.high {
				t.Errorf("%d drones, %d strays, %d high strays; want %d, %d, %d", len(f.Drones()), got[fleet.Stray], got[fleet.HighStray], tt.n, tt.stray, tt.high)
			}
		})
	}
}

func TestUnknownAirportPanics(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Error("no panic for an unknown airport")
		}
	}()
	fleet.New(1, 1, start, fleet.Options{Airports: []string{"XXXX"}})
}

// TestOperators: with Options.Operators every third record of a drone
// carries its pilot, standing near its site, and the drones fly exactly as
// without (the demo's fleet is the tests' fleet with pilots).
func TestOperators(t *testing.T) {
	plain := fleet.New(20, 5, start, fleet.Options{})
	with := fleet.New(20, 5, start, fleet.Options{Operators: true})
	sites := map[string]fleet.DroneInfo{}
	for _, d := range with.Drones() {
		sites[d.ID] = d
	}
	r1, r2 := rand.New(rand.NewPCG(1, 2)), rand.New(rand.NewPCG(1, 2))
	carried := 0
	for range 300 {
		a, b := plain.Step(r1, 0), with.Step(r2, 0)
		if len(a) != len(b) {
			t.Fatalf("%d records without operators, %d with", len(a), len(b))
		}
		for i := range b {
			op := b[i].Operator
			if want := b[i].Seq%3 == 1; (op != nil) != want {
				t.Fatalf("%s seq %d: operator %v, want one: %v", b[i].DroneID, b[i].Seq, op, want)
			}
			if a[i].Operator != nil {
				t.Fatalf("%s: an operator without Options.Operators", a[i].DroneID)
			}
			b[i].Operator = nil
			if !reflect.DeepEqual(a[i], b[i]) {
				t.Fatalf("%s flies differently with operators:\n%+v\n%+v", b[i].DroneID, a[i], b[i])
			}
			if op == nil {
				continue
			}
			carried++
			site := sites[b[i].DroneID]
			if d := distM(&telemetry.Position{Lat: op.Lat, Lon: op.Lon}, &telemetry.Position{Lat: site.Lat, Lon: site.Lon}); d < 10 || d > 35 || op.Type != telemetry.OperatorLive {
				t.Fatalf("%s: pilot %+v is %.1f m from the site, want 10-35 m, type live", b[i].DroneID, *op, d)
			}
		}
	}
	if carried != 20*100 {
		t.Errorf("%d records carried a pilot, want %d", carried, 20*100)
	}
}
