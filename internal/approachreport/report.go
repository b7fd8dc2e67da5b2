// Package approachreport measures approaching warnings on the simulated
// mission fleet (internal/fleet, GNSS noise on) through the alerter's own
// engine: for every real approach — a drone entering a zone, a raise — how
// long before it the warning came, how many warning episodes it took, and
// how many warnings went to drones that did not enter (docs/design.md,
// "Approaching warnings"; BENCHMARKS.md has the figures and the command).
package approachreport

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/nofly-dev/nofly/alerts"
	"github.com/nofly-dev/nofly/dedup"
	"github.com/nofly-dev/nofly/geofence"
	"github.com/nofly-dev/nofly/internal/fleet"
)

// Options of a measurement.
type Options struct {
	Drones   int
	Duration time.Duration // simulated, one fix per drone per second
	Seed     uint64
	// StrayShare is the fleet's share of drones that enter zones (0: the
	// fleet's default).
	StrayShare float64
	// Derived drops each fix's speed and heading, so the velocity is
	// derived from the noisy positions alone.
	Derived  bool
	Approach alerts.ApproachSettings
	Zones    *geofence.Index
	// Window: a warning episode belongs to a raise of its drone and zone
	// that comes at most this long after it opened (default 3 min); any
	// other is a false warning.
	Window time.Duration
}

// Report is what a measurement found.
type Report struct {
	Drones, Clear, Strays int
	Hours                 float64 // simulated drone-hours
	Records               int

	// Entries are the real approaches: raises of a drone in a zone, but
	// for StartedInside, raised at a drone's first fixes (the fleet starts
	// its drones part-way into a mission, some inside a zone already).
	Entries, StartedInside int
	// Warned entries had a warning episode before them; Missed had none:
	// MissedVertical of them entered through a floor or a ceiling (the
	// drone's last fix was already over the zone's area: a straight
	// horizontal path predicts nothing there), MissedClock were raised by
	// the clock (a zone's window opening over the drone), MissedFast
	// entered within two fixes of approaching (no second fix to confirm).
	Warned, Missed                           int
	MissedVertical, MissedClock, MissedOther int
	// Episodes is every approaching event; EntryEpisodes those that
	// belong to an entry (their count over Entries is the episodes per
	// real approach).
	Episodes, EntryEpisodes int
	// Lead times, seconds from the entry's first episode to the raise.
	LeadP10, LeadMedian, LeadP90 float64
	// False warnings: episodes not followed by their zone's raise, by the
	// kind of drone.
	FalseClear, FalseStray int
	ClearHours, StrayHours float64
	Ended                  int // approach_ended events
}

// EpisodesPerApproach is EntryEpisodes / Entries.
func (r *Report) EpisodesPerApproach() float64 {
	if r.Entries == 0 {
		return 0
	}
	return float64(r.EntryEpisodes) / float64(r.Entries)
}

type pair struct{ drone, zone string }

// Measure flies the fleet for o.Duration and runs every fix through one
// engine with o.Approach.
func Measure(ctx context.Context, o Options) (Report, error) {
	if o.Window <= 0 {
		o.Window = 3 * time.Minute
	}
	start := time.Date(2026, 12, 6, 8, 0, 0, 0, time.UTC)
	f := fleet.New(o.Drones, o.Seed, start, fleet.Options{StrayShare: o.StrayShare})
	kind := map[string]fleet.Kind{}
	r := Report{Drones: o.Drones}
	for _, d := range f.Drones() {
		kind[d.ID] = d.Kind
		if d.Kind == fleet.Clear {
			r.Clear++
		} else {
			r.Strays++
		}
	}
	e, err := alerts.NewEngine(0, dedup.Snapshot{Applied: dedup.NoVersion, ZoneVersion: alerts.NoZoneVersion})
	if err != nil {
		return r, err
	}
	e.SetApproach(o.Approach)
	e.SetTrackInterval(0)
	rng := rand.New(rand.NewPCG(o.Seed, 1))
	open := map[pair][]time.Time{} // episodes not yet matched to a raise
	var leads []float64
	falseOf := func(p pair, n int) {
		if kind[p.drone] == fleet.Clear {
			r.FalseClear += n
		} else {
			r.FalseStray += n
		}
	}
	last := map[string]geofence.Point{} // each drone's fix of the step before
	var off int64
	steps := int(o.Duration / time.Second)
	recs := make([]alerts.Record, 0, o.Drones)
	for s := 0; s < steps; s++ {
		if s%600 == 0 && ctx.Err() != nil {
			return r, ctx.Err()
		}
		recs = recs[:0]
		fixes := f.Step(rng, 0)
		for _, p := range fixes {
			if o.Derived {
				p.SpeedMPS, p.HeadingDeg = nil, nil
			}
			recs = append(recs, alerts.Record{Offset: off, Time: p.TS, Value: p.AppendJSON(nil)})
			off++
		}
		r.Records += len(recs)
		out := e.Apply(o.Zones, recs)
		if out == nil {
			continue
		}
		for i := range out.Events {
			ev := &out.Events[i]
			k := pair{ev.DroneID, ev.ZoneID}
			switch ev.Type {
			case alerts.Approaching:
				r.Episodes++
				open[k] = append(open[k], ev.TS)
			case alerts.ApproachEnded:
				r.Ended++
			case alerts.Raised:
				if _, heard := last[ev.DroneID]; !heard {
					r.StartedInside++
					delete(open, k)
					continue
				}
				r.Entries++
				var mine []time.Time
				for _, t := range open[k] {
					if ev.TS.Sub(t) <= o.Window {
						mine = append(mine, t)
					}
				}
				falseOf(k, len(open[k])-len(mine))
				delete(open, k)
				r.EntryEpisodes += len(mine)
				if len(mine) == 0 {
					r.Missed++
					switch {
					case ev.Reason != "":
						r.MissedClock++
					case overArea(o.Zones, ev.ZoneID, last[ev.DroneID]):
						r.MissedVertical++
					default:
						r.MissedOther++
					}
					continue
				}
				r.Warned++
				leads = append(leads, ev.TS.Sub(mine[0]).Seconds())
			}
		}
		for i := range fixes {
			last[fixes[i].DroneID] = geofence.Point{Lat: fixes[i].Lat, Lon: fixes[i].Lon}
		}
	}
	for k, ts := range open {
		falseOf(k, len(ts))
	}
	hours := o.Duration.Hours()
	r.Hours = hours * float64(o.Drones)
	r.ClearHours, r.StrayHours = hours*float64(r.Clear), hours*float64(r.Strays)
	slices.Sort(leads)
	r.LeadP10, r.LeadMedian, r.LeadP90 = quantile(leads, 0.1), quantile(leads, 0.5), quantile(leads, 0.9)
	return r, nil
}

func quantile(sorted []float64, q float64) float64 {
	if len(sorted) == 0 {
		return 0
	}
	return sorted[min(len(sorted)-1, int(q*float64(len(sorted))))]
}

// Print writes the report as a Markdown table row set, per 1,000 real
// approaches where it says so.
func (r *Report) Print(w io.Writer, label string) {
	per := func(n int) float64 {
		if r.Entries == 0 {
			return 0
		}
		return 1000 * float64(n) / float64(r.Entries)
	}
	perHour := func(n int, h float64) float64 {
		if h == 0 {
			return 0
		}
		return float64(n) / h
	}
	fmt.Fprintf(w, "%s: %d drones (%d clear, %d strays), %.0f drone-hours, %d fixes\n", label, r.Drones, r.Clear, r.Strays, r.Hours, r.Records)
	fmt.Fprintf(w, "| measure | value |\n| --- | --- |\n")
	fmt.Fprintf(w, "| real approaches (entries; not counted: %d inside at the first fix) | %d |\n", r.StartedInside, r.Entries)
	fmt.Fprintf(w, "| warned before entry | %d (%.1f %%) |\n", r.Warned, 100*float64(r.Warned)/float64(max(1, r.Entries)))
	fmt.Fprintf(w, "| not warned: through a floor or ceiling / raised by the clock / other | %d / %d / %d |\n", r.MissedVertical, r.MissedClock, r.MissedOther)
	fmt.Fprintf(w, "| lead time, median / p10 / p90 | %.1f s / %.1f s / %.1f s |\n", r.LeadMedian, r.LeadP10, r.LeadP90)
	fmt.Fprintf(w, "| episodes per real approach | %.3f |\n", r.EpisodesPerApproach())
	fmt.Fprintf(w, "| false warnings, clear drones (never enter) | %d: %.1f per 1,000 approaches, %.3f per drone-hour |\n", r.FalseClear, per(r.FalseClear), perHour(r.FalseClear, r.ClearHours))
	fmt.Fprintf(w, "| false warnings, strays (zones they did not enter) | %d: %.1f per 1,000 approaches, %.3f per drone-hour |\n", r.FalseStray, per(r.FalseStray), perHour(r.FalseStray, r.StrayHours))
	fmt.Fprintf(w, "| approach_ended events | %d |\n", r.Ended)
}

// overArea reports whether p was over the zone's area (horizontally
// inside it): an entry from there came through a floor or a ceiling.
func overArea(ix *geofence.Index, zone string, p geofence.Point) bool {
	d, ok := ix.DistanceM(zone, p)
	return ok && d == 0
}
