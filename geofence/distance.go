package geofence

import "math"

// DistanceM is the horizontal distance in metres from p to the area of the
// zone with that id (0 inside it), whatever its vertical limits and
// activity, and false for an unknown zone: the approach rules' closing
// test needs the distance at a drone's previous position.
func (ix *Index) DistanceM(zoneID string, p Point) (float64, bool) {
	if ix == nil {
		return 0, false
	}
	zi, ok := ix.byID[zoneID]
	if !ok {
		return 0, false
	}
	x, y := normLon(p.Lon), p.Lat
	if !finite(x) || !finite(y) {
		return 0, false
	}
	d := math.Inf(1)
	for pi := ix.zparts[zi]; pi < ix.zparts[zi+1]; pi++ {
		d = math.Min(d, ix.distM(&ix.parts[pi], x, y))
	}
	return d, !math.IsInf(d, 1)
}
