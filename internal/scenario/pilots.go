package scenario

import (
	"hash/fnv"

	"github.com/nofly-dev/nofly/telemetry"
)

// WithOperators returns a copy of recs in which the drones report their
// pilots: a third report none, a third a live pilot with every position
// (moving with it, with an altitude), a third a pilot on every fifth seq
// only (take-off point, fixed location or no type; with and without an
// altitude). So raises happen at positions that carry a new pilot and at
// positions that carry none after one that did, and a pilot taken from the
// wrong position shows. The pilot is a function of (drone, seq): a re-sent
// record is the same record.
func WithOperators(recs []telemetry.Position) []telemetry.Position {
	out := make([]telemetry.Position, len(recs))
	types := []string{telemetry.OperatorTakeoff, telemetry.OperatorFixed, ""}
	for i, p := range recs {
		h := fnv.New32a()
		h.Write([]byte(p.DroneID))
		kind := h.Sum32() % 3
		seq := uint64(p.Seq)
		switch {
		case kind == 1:
			p.Operator = &telemetry.Operator{Lat: p.Lat - 0.004, Lon: p.Lon + 0.003 + float64(seq%11)*1e-5, Type: telemetry.OperatorLive,
				AltM: telemetry.Float(40 + float64(seq%3))}
		case kind == 2 && seq%5 == 0:
			p.Operator = &telemetry.Operator{Lat: 51.46 + float64(seq%13)*1e-4, Lon: -0.45, Type: types[seq%3]}
			if seq%2 == 0 {
				p.Operator.AltM = telemetry.Float(25.5)
			}
		}
		out[i] = p
	}
	return out
}
