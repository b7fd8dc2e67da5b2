package benchcompare

import (
	"encoding/json"
	"fmt"
	"strings"
)

// Event is what both sides are compared on: an alarm of a drone in a zone
// raised or cleared, by the record of seq.
type Event struct {
	Type    string // "raised" or "cleared"
	DroneID string
	ZoneID  string
	Seq     int64
}

func (e Event) String() string {
	return fmt.Sprintf("%s %s %s seq %d", e.Type, e.DroneID, e.ZoneID, e.Seq)
}

// NoflyEvent reads an event of alerts.events or of `alerter replay`'s
// output (the same JSON). ok is false for a signal_lost or
// signal_regained event: Tile38 has no such thing, so the comparison
// leaves them out (the alerter's own tests hold them to the reference).
// Any other type is an error: the benchmark turns approaching warnings off.
func NoflyEvent(b []byte) (e Event, ok bool, err error) {
	e, err = noflyEvent(b)
	if err != nil || !Compared(e.Type) {
		return Event{}, false, err
	}
	return e, true, nil
}

// Compared reports whether events of type t are compared with Tile38's
// and the reference's: raises and clears.
func Compared(t string) bool { return t == "raised" || t == "cleared" }

func noflyEvent(b []byte) (Event, error) {
	var e struct {
		Type    string `json:"type"`
		DroneID string `json:"drone_id"`
		ZoneID  string `json:"zone_id"`
		Seq     int64  `json:"seq"`
	}
	if err := json.Unmarshal(b, &e); err != nil {
		return Event{}, fmt.Errorf("benchcompare: nofly event: %w", err)
	}
	if !Compared(e.Type) && e.Type != "signal_lost" && e.Type != "signal_regained" {
		return Event{}, fmt.Errorf("benchcompare: nofly event of type %q", e.Type)
	}
	return Event{Type: e.Type, DroneID: e.DroneID, ZoneID: e.ZoneID, Seq: e.Seq}, nil
}

// Tile38Event maps a Tile38 channel message to an Event: enter is raised,
// exit cleared; the zone is the channel's name after prefix, the seq the
// object's seq field (the benchmark SETs every position with FIELD seq).
// ok is false for a message of another kind (inside, outside, cross, del,
// drop), which the benchmark's DETECT enter,exit does not ask for.
func Tile38Event(msg []byte, prefix string) (e Event, ok bool, err error) {
	var m struct {
		Command string `json:"command"`
		Detect  string `json:"detect"`
		Hook    string `json:"hook"`
		ID      string `json:"id"`
		Fields  struct {
			Seq *float64 `json:"seq"`
		} `json:"fields"`
	}
	if err := json.Unmarshal(msg, &m); err != nil {
		return Event{}, false, fmt.Errorf("benchcompare: tile38 message: %w", err)
	}
	switch m.Detect {
	case "enter":
		e.Type = "raised"
	case "exit":
		e.Type = "cleared"
	default:
		return Event{}, false, nil
	}
	zone, found := strings.CutPrefix(m.Hook, prefix)
	if !found {
		return Event{}, false, fmt.Errorf("benchcompare: tile38 message of channel %q, not %s*", m.Hook, prefix)
	}
	if m.Fields.Seq == nil {
		return Event{}, false, fmt.Errorf("benchcompare: tile38 message without a seq field: %.200s", msg)
	}
	return Event{Type: e.Type, DroneID: m.ID, ZoneID: zone, Seq: int64(*m.Fields.Seq)}, true, nil
}

// Diff is a side's events against the reference.
type Diff struct {
	Events    int // events the side delivered
	Reference int // events of the reference
	Missing   int // reference events the side did not deliver
	Extra     int // distinct events the side delivered that the reference has not
	// Extra split by type: a spurious pair is one of each.
	ExtraRaised, ExtraCleared int
	Duplicate                 int // deliveries of an event beyond the reference's count (at least one)
	Examples                  []string
}

// Exact says the side delivered the reference's events, each once.
func (d Diff) Exact() bool { return d.Missing+d.Extra+d.Duplicate == 0 }

// Compare checks got against ref, event by event.
func Compare(got, ref []Event) Diff {
	d := Diff{Events: len(got), Reference: len(ref)}
	want := make(map[Event]int, len(ref))
	for _, e := range ref {
		want[e]++
	}
	seen := make(map[Event]int, len(got))
	for _, e := range got {
		seen[e]++
	}
	example := func(s string) {
		if len(d.Examples) < 5 {
			d.Examples = append(d.Examples, s)
		}
	}
	for e, n := range seen {
		if n > max(1, want[e]) {
			d.Duplicate += n - max(1, want[e])
			example("duplicate: " + e.String())
		}
		if want[e] == 0 {
			d.Extra++
			if e.Type == "raised" {
				d.ExtraRaised++
			} else {
				d.ExtraCleared++
			}
			example("extra: " + e.String())
		}
	}
	for e := range want {
		if seen[e] == 0 {
			d.Missing++
			example("missing: " + e.String())
		}
	}
	return d
}
