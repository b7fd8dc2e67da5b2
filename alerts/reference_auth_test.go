package alerts_test

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/nofly-dev/nofly/alerts"
	"github.com/nofly-dev/nofly/authorization"
	"github.com/nofly-dev/nofly/dedup"
	"github.com/nofly-dev/nofly/geofence"
	"github.com/nofly-dev/nofly/internal/reference"
	"github.com/nofly-dev/nofly/internal/scenario"
)

// TestEngineEqualsReferenceWithAuthorizations: the clock scenario on six
// partitions with authorisations of a third of its drones (by id, by
// prefix, all zones or one category, windows that start and end during
// the run) and, halfway, a new version that revokes some and adds others:
// the engines' events — the authorisations raises carry, every authorized
// and unauthorized with its reason — equal the independent reference's, in
// batches of several sizes.
func TestEngineEqualsReferenceWithAuthorizations(t *testing.T) {
	const partitions = 6
	set, ix, refZones := scenarioZones(t)
	sc := scenario.Generate(scenario.DefaultConfig())
	start, end := sc.Received[0], sc.Received[len(sc.Received)-1]
	span := end.Sub(start)

	// The authorisations, made from one description for both sides.
	rng := rand.New(rand.NewPCG(28, 1))
	var drones []string
	seen := map[string]bool{}
	for _, p := range sc.Records {
		if !seen[p.DroneID] {
			seen[p.DroneID] = true
			drones = append(drones, p.DroneID)
		}
	}
	cats := []string{}
	for _, z := range set.Zones {
		if !slices.Contains(cats, string(z.Category)) {
			cats = append(cats, string(z.Category))
		}
	}
	at := func(f float64) time.Time {
		return start.Add(time.Duration(f * float64(span))).Truncate(time.Millisecond)
	}
	var v1 []authorization.Authorization
	for i, d := range drones {
		if i%3 != 0 {
			continue
		}
		a := authorization.Authorization{ID: fmt.Sprintf("a%03d", i), Drone: d, From: at(rng.Float64() * 0.5),
			Reference: fmt.Sprintf("P-%d", i), Reason: "test", By: "test"}
		a.Until = a.From.Add(time.Duration((0.1 + rng.Float64()*0.6) * float64(span))).Truncate(time.Millisecond)
		switch i % 4 {
		case 0:
			a.Zones.All = true
		case 1:
			a.Zones.Categories = []geofence.Category{geofence.Category(cats[rng.IntN(len(cats))])}
		case 2:
			a.Zones.IDs = []string{set.Zones[rng.IntN(len(set.Zones))].ID}
		default:
			a.Drone = d[:len(d)-1] + "*" // a prefix: may cover its neighbours too
			a.Zones.All = true
		}
		v1 = append(v1, a)
	}
	s1 := authorization.NewSet(1, v1)
	// Version 2, at the middle of the log: a quarter revoked at the
	// switch's time (some before, some after their start), one more
	// added over every drone in the first category.
	switchAt := len(sc.Records) / 2
	s2 := s1
	for i, a := range v1 {
		if i%4 == 1 {
			s2, _ = s2.Revoke(a.ID, sc.Received[switchAt].Add(time.Duration(i%3)*time.Second), "test")
		}
	}
	s2, _ = s2.Add(authorization.Authorization{ID: "z-late", Drone: drones[1][:2] + "*", Zones: authorization.Zones{Categories: []geofence.Category{geofence.Category(cats[0])}},
		From: at(0.4), Until: at(0.9), Reference: "LATE", Reason: "test", By: "test"})
	refSets := [][]reference.Auth{toRef(s1), toRef(s2)}

	// The partitions' logs with ticks; the engine switches set at the
	// reference's index of the switch.
	logs, refRecs, refSwitch := clockLogs(sc, partitions, switchAt)
	want := reference.Run(reference.Input{Sets: [][]reference.Zone{refZones}, Recs: refRecs, Partitions: partitions,
		AuthSets: refSets, AuthSwitchAt: []int{refSwitch}})
	counts := map[string]int{}
	covered := 0
	for _, e := range want {
		counts[e.Type+"/"+e.Reason]++
		if e.Type == "raised" && e.Auth != "" {
			covered++
		}
	}
	if covered < 20 || counts["authorized/"] < 5 || counts["unauthorized/expired"] < 5 || counts["unauthorized/revoked"] < 3 {
		t.Fatalf("the run authorises too little to prove anything: %d covered raises, %v", covered, counts)
	}
	t.Logf("reference: %d covered raises, %v", covered, counts)
	for _, batch := range []int{1, 50, 1000} {
		var got []reference.Event
		for q, recs := range logs {
			e, err := alerts.NewEngine(q, dedup.Snapshot{Applied: dedup.NoVersion, ZoneVersion: alerts.NoZoneVersion})
			if err != nil {
				t.Fatal(err)
			}
			for from := 0; from < len(recs); {
				// A batch holds records of one version: the engine sees the
				// new set from the first record at or after the switch.
				late := recs[from].idx >= refSwitch
				upto := from
				var chunk []alerts.Record
				for upto < len(recs) && upto < from+batch && (recs[upto].idx >= refSwitch) == late {
					chunk = append(chunk, recs[upto].r)
					upto++
				}
				from = upto
				e.SetAuthorizations(s1)
				if late {
					e.SetAuthorizations(s2)
				}
				out := e.Apply(ix, chunk)
				if out == nil {
					continue
				}
				got = append(got, asReference(t, out.Events)...)
			}
		}
		d, err := reference.Compare(want, got)
		if err != nil {
			t.Fatal(err)
		}
		if !d.OK() {
			t.Errorf("batch %d: %v", batch, d)
		} else if batch == 1 {
			t.Logf("batch %d: %v", batch, d)
		}
	}
}

// toRef is the reference's copy of a set: the same authorisations, through
// their JSON (the API's shape), read by the reference's own parser.
func toRef(s *authorization.Set) []reference.Auth {
	b, err := jsonMarshal(s.All())
	if err != nil {
		panic(err)
	}
	out, err := reference.ParseAuths(b)
	if err != nil {
		panic(err)
	}
	return out
}

func jsonMarshal(v any) ([]byte, error) { return json.Marshal(v) }
