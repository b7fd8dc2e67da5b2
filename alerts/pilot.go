package alerts

import (
	"math"
	"time"
)

// Pilot is a drone's pilot position as the API answers it: where, what
// kind of location, as of when (the ts of the position that reported it,
// so its age can be shown), and its range and bearing from the drone
// (null when the drone's position is not known).
type Pilot struct {
	Lat  float64  `json:"lat"`
	Lon  float64  `json:"lon"`
	AltM *float64 `json:"alt_m"`
	// Type is takeoff, live, fixed or unknown.
	Type string    `json:"type"`
	TS   time.Time `json:"ts"`
	// RangeM is the great-circle distance from the drone to the pilot in
	// metres (to 0.1 m) and BearingDeg the initial bearing from the drone
	// to the pilot in degrees clockwise from true north, [0, 360) to 0.1°.
	RangeM     *float64 `json:"range_m"`
	BearingDeg *float64 `json:"bearing_deg"`
}

// PilotTypeUnknown is a Pilot's Type when the feed did not say.
const PilotTypeUnknown = "unknown"

// PilotOf is o as the API answers it, its range and bearing from the
// drone at (lat, lon) when known; nil for no pilot.
func PilotOf(o *OperatorFix, lat, lon float64, droneKnown bool) *Pilot {
	if o == nil || o.IsZero() {
		return nil
	}
	p := &Pilot{Lat: o.Lat, Lon: o.Lon, AltM: o.AltM, Type: o.Type, TS: o.TS}
	if p.Type == "" {
		p.Type = PilotTypeUnknown
	}
	if droneKnown {
		r, b := RangeBearing(lat, lon, o.Lat, o.Lon)
		r, b = math.Round(r*10)/10, math.Round(b*10)/10
		if b >= 360 {
			b = 0
		}
		p.RangeM, p.BearingDeg = &r, &b
	}
	return p
}

// earthRadiusM is the mean Earth radius (IUGG).
const earthRadiusM = 6371008.8

// RangeBearing returns the great-circle distance in metres (haversine) and
// the initial bearing in degrees [0, 360) from (lat1, lon1) to (lat2,
// lon2).
func RangeBearing(lat1, lon1, lat2, lon2 float64) (float64, float64) {
	const rad = math.Pi / 180
	φ1, φ2 := lat1*rad, lat2*rad
	dφ, dλ := (lat2-lat1)*rad, (lon2-lon1)*rad
	h := math.Sin(dφ/2)*math.Sin(dφ/2) + math.Cos(φ1)*math.Cos(φ2)*math.Sin(dλ/2)*math.Sin(dλ/2)
	d := 2 * earthRadiusM * math.Asin(math.Sqrt(min(1, h)))
	y := math.Sin(dλ) * math.Cos(φ2)
	x := math.Cos(φ1)*math.Sin(φ2) - math.Sin(φ1)*math.Cos(φ2)*math.Cos(dλ)
	b := math.Mod(math.Atan2(y, x)/rad+360, 360)
	return d, b
}
