// Package zonegen generates national-size zone sets, deterministic by
// seed, in the formats PUT /v1/zones takes (issue 29): a grid like the
// FAA's UAS facility maps (GeoJSON) and a set of EUROCAE ED-269 circles and
// polygons. Tests, benchmarks and soak runs use them; nothing in the
// alerter does.
//
// The shapes are what makes a set expensive, so they follow the real
// ones: facility-map cells are 30"×30" squares on a global grid, clustered
// around airports (many zones, few vertices, dense where drones fly);
// ED-269 zones are circles (aerodromes, prisons, plants) and star-shaped
// polygons of 6-40 vertices (cities, reserves, military areas), some with
// a time applicability.
package zonegen

import (
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
)

// Site is where a set's zones cluster (an airport, a city): where drones
// fly, for queries and soak positions.
type Site struct {
	Name     string
	Lon, Lat float64
	RadiusM  float64 // how far from the site its zones reach
}

// Set is one generated zone set.
type Set struct {
	// Format is the format Doc is in: "geojson" or "ed269", as the zone
	// store names them.
	Format string
	Doc    []byte
	Zones  int
	Sites  []Site
}

// cell is the facility maps' grid step: 30 arc-seconds.
const cell = 1.0 / 120

// ftToM converts feet to metres.
const ftToM = 0.3048

// conus is the box the facility-map airports are drawn in (lon, lat).
var conus = [4]float64{-124, 25, -67, 49}

// europe is the box the ED-269 zones are drawn in (lon, lat).
var europe = [4]float64{-9, 36, 30, 60}

// geoFeature is a GeoJSON Feature of nofly's zone format; the struct's
// field order is the document's, so a seed gives the same bytes.
type geoFeature struct {
	Type     string      `json:"type"`
	Geometry geoGeometry `json:"geometry"`
	Props    geoProps    `json:"properties"`
}

type geoGeometry struct {
	Type        string         `json:"type"`
	Coordinates [][][2]float64 `json:"coordinates"`
}

type geoProps struct {
	ID           string   `json:"id"`
	Name         string   `json:"name"`
	Category     string   `json:"category"`
	FloorM       *float64 `json:"floor_m,omitempty"`
	FloorRef     string   `json:"floor_ref,omitempty"`
	ClearBufferM float64  `json:"clear_buffer_m,omitempty"`
}

// FAAGrid returns a GeoJSON FeatureCollection of n facility-map cells
// around airports drawn in the contiguous US. Each cell is the volume above
// its facility-map ceiling (the most a drone may fly there without further
// coordination: 0, 50, 100, 200, 300 or 400 ft AGL, lower nearer the
// runway): floor_m is that ceiling, AGL, and there is no ceiling, so a
// drone over it alarms and one below does not. A 0 ft cell is the whole
// column. Cells are restricted; each has a 10 m clear buffer. Cells of
// airports that overlap are on one grid and listed once.
func FAAGrid(seed uint64, n int) *Set {
	r := rand.New(rand.NewPCG(seed, 0x46414147))
	set := &Set{Format: "geojson"}
	feats := make([]geoFeature, 0, n)
	seen := make(map[[2]int32]bool, n)
	for k := 0; len(feats) < n; k++ {
		apt := Site{Name: airportCode(r, k), Lon: between(r, conus[0], conus[2]), Lat: between(r, conus[1], conus[3]),
			RadiusM: between(r, 4000, 9300)} // Class D to Class C surface areas
		set.Sites = append(set.Sites, apt)
		dLat := apt.RadiusM / 111_320
		dLon := dLat / math.Cos(apt.Lat*math.Pi/180)
		y0, y1 := int32(math.Floor((apt.Lat-dLat)/cell)), int32(math.Ceil((apt.Lat+dLat)/cell))
		x0, x1 := int32(math.Floor((apt.Lon-dLon)/cell)), int32(math.Ceil((apt.Lon+dLon)/cell))
		for y := y0; y < y1 && len(feats) < n; y++ {
			for x := x0; x < x1 && len(feats) < n; x++ {
				clon, clat := (float64(x)+0.5)*cell, (float64(y)+0.5)*cell
				d := distM(apt.Lon, apt.Lat, clon, clat)
				if d > apt.RadiusM || seen[[2]int32{x, y}] {
					continue
				}
				seen[[2]int32{x, y}] = true
				ft := ceilingFt(d/apt.RadiusM, r)
				p := geoProps{ID: fmt.Sprintf("UASFM-%s-%d-%d", apt.Name, y, x), Category: "restricted", ClearBufferM: 10,
					Name: fmt.Sprintf("%s UAS facility map %d ft AGL", apt.Name, ft)}
				if ft > 0 {
					m := round(float64(ft)*ftToM, 2)
					p.FloorM, p.FloorRef = &m, "AGL"
				}
				xa, xb := round(float64(x)*cell, 6), round(float64(x+1)*cell, 6)
				ya, yb := round(float64(y)*cell, 6), round(float64(y+1)*cell, 6)
				feats = append(feats, geoFeature{Type: "Feature", Props: p, Geometry: geoGeometry{Type: "Polygon",
					Coordinates: [][][2]float64{{{xa, ya}, {xb, ya}, {xb, yb}, {xa, yb}, {xa, ya}}}}})
			}
		}
	}
	doc := struct {
		Type     string       `json:"type"`
		Version  string       `json:"version"`
		Features []geoFeature `json:"features"`
	}{"FeatureCollection", fmt.Sprintf("zonegen-faa-grid-%d-%d", seed, n), feats}
	set.Doc = mustJSON(doc)
	set.Zones = len(feats)
	return set
}

// ceilingFt is a facility-map ceiling at a relative distance f (0 at the
// airport, 1 at the edge of its area): 0 ft over the runways, stepping up
// outwards, with some noise as real maps have (obstacles, approaches).
func ceilingFt(f float64, r *rand.Rand) int {
	steps := []int{0, 50, 100, 200, 300, 400}
	i := int(f*float64(len(steps))) + r.IntN(3) - 1
	return steps[min(max(i, 0), len(steps)-1)]
}

// airportCode is a K-prefixed four-letter code, unique by k.
func airportCode(r *rand.Rand, k int) string {
	const letters = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
	b := []byte{'K', letters[r.IntN(26)], letters[r.IntN(26)], letters[r.IntN(26)]}
	return fmt.Sprintf("%s%d", b, k)
}

// ED-269's JSON encoding, the fields geofence reads and a few it keeps
// for people (country, type, reason, message).
type edZone struct {
	Identifier    string            `json:"identifier"`
	Country       string            `json:"country"`
	Name          string            `json:"name"`
	Type          string            `json:"type"`
	Restriction   string            `json:"restriction"`
	Reason        []string          `json:"reason"`
	Message       string            `json:"message,omitempty"`
	Applicability []edApplicability `json:"applicability"`
	ZoneAuthority []edAuthority     `json:"zoneAuthority"`
	Geometry      []edGeometry      `json:"geometry"`
}

type edApplicability struct {
	Permanent     string          `json:"permanent"`
	StartDateTime *string         `json:"startDateTime"`
	EndDateTime   *string         `json:"endDateTime"`
	DailyPeriod   []edDailyPeriod `json:"dailyPeriod,omitempty"`
}

type edDailyPeriod struct {
	Day       []string `json:"day"`
	StartTime string   `json:"startTime"`
	EndTime   string   `json:"endTime"`
}

type edAuthority struct {
	Name    string `json:"name"`
	Service string `json:"service"`
	Email   string `json:"email"`
	SiteURL string `json:"siteURL"`
}

type edGeometry struct {
	UomDimensions          string       `json:"uomDimensions"`
	LowerLimit             *float64     `json:"lowerLimit"`
	LowerVerticalReference string       `json:"lowerVerticalReference"`
	UpperLimit             *float64     `json:"upperLimit"`
	UpperVerticalReference string       `json:"upperVerticalReference"`
	HorizontalProjection   edProjection `json:"horizontalProjection"`
}

type edProjection struct {
	Type        string         `json:"type"`
	Center      *[2]float64    `json:"center,omitempty"`
	Radius      float64        `json:"radius,omitempty"`
	Coordinates [][][2]float64 `json:"coordinates,omitempty"`
}

// cities are the places ED-269 zones are named after and drawn around:
// real names (some with the accents authorities publish them with),
// approximate positions.
var cities = []struct {
	name, country string
	lon, lat      float64
}{
	{"Paris", "FRA", 2.35, 48.86}, {"Lyon", "FRA", 4.84, 45.76}, {"Marseille", "FRA", 5.37, 43.30},
	{"Toulouse", "FRA", 1.44, 43.60}, {"Berlin", "DEU", 13.40, 52.52}, {"München", "DEU", 11.58, 48.14},
	{"Köln", "DEU", 6.96, 50.94}, {"Hamburg", "DEU", 9.99, 53.55}, {"Frankfurt am Main", "DEU", 8.68, 50.11},
	{"Zürich", "CHE", 8.54, 47.37}, {"Genève", "CHE", 6.14, 46.20}, {"Wien", "AUT", 16.37, 48.21},
	{"Madrid", "ESP", -3.70, 40.42}, {"Barcelona", "ESP", 2.17, 41.39}, {"Sevilla", "ESP", -5.98, 37.39},
	{"Lisboa", "PRT", -9.14, 38.72}, {"Porto", "PRT", -8.61, 41.15}, {"Roma", "ITA", 12.50, 41.90},
	{"Milano", "ITA", 9.19, 45.46}, {"Napoli", "ITA", 14.27, 40.85}, {"Bruxelles", "BEL", 4.35, 50.85},
	{"Amsterdam", "NLD", 4.90, 52.37}, {"Rotterdam", "NLD", 4.48, 51.92}, {"København", "DNK", 12.57, 55.68},
	{"Praha", "CZE", 14.42, 50.08}, {"Kraków", "POL", 19.94, 50.06}, {"Warszawa", "POL", 21.01, 52.23},
	{"Budapest", "HUN", 19.04, 47.50}, {"Ljubljana", "SVN", 14.51, 46.06}, {"Zagreb", "HRV", 15.98, 45.81},
	{"Göteborg", "SWE", 11.97, 57.71}, {"Dublin", "IRL", -6.26, 53.35}, {"Luxembourg", "LUX", 6.13, 49.61},
	{"Bratislava", "SVK", 17.11, 48.15}, {"Athína", "GRC", 23.73, 37.98}, {"Bucureşti", "ROU", 26.10, 44.43},
}

// kinds are the zones' purposes: name suffix, restriction, reason,
// whether a circle, radius range (circles) or size range (polygons), m.
var kinds = []struct {
	name, restriction, reason string
	circle                    bool
	min, max                  float64
}{
	{"aerodrome traffic zone", "PROHIBITED", "AIR_TRAFFIC", true, 2000, 5000},
	{"heliport", "REQ_AUTHORISATION", "AIR_TRAFFIC", true, 500, 1500},
	{"prison", "PROHIBITED", "SECURITY", true, 300, 800},
	{"power plant", "PROHIBITED", "SENSITIVE", true, 1000, 3000},
	{"hospital", "CONDITIONAL", "PRIVACY", true, 200, 600},
	{"city centre", "REQ_AUTHORISATION", "POPULATION", false, 1500, 6000},
	{"nature reserve", "CONDITIONAL", "NATURE", false, 1000, 8000},
	{"military area", "PROHIBITED", "SECURITY", false, 2000, 12000},
	{"stadium", "PROHIBITED", "SENSITIVE", false, 300, 900},
}

// ED269 returns an ED-269 document ({"UASZoneList": [...]}) of n zones
// drawn within 60 km of European cities: circles and star-shaped polygons
// of 6-40 vertices, limits in metres or feet, AGL or AMSL. About one in
// ten zones has a bounded applicability (a date range), one in twenty a
// daily period; the rest are permanent.
func ED269(seed uint64, n int) *Set {
	r := rand.New(rand.NewPCG(seed, 0x45443236))
	set := &Set{Format: "ed269"}
	for _, c := range cities {
		set.Sites = append(set.Sites, Site{Name: c.name, Lon: c.lon, Lat: c.lat, RadiusM: 60_000})
	}
	zones := make([]edZone, 0, n)
	for i := range n {
		c := cities[r.IntN(len(cities))]
		k := kinds[r.IntN(len(kinds))]
		// Zones crowd towards the city: distance ~ 60 km × u².
		u := r.Float64()
		lon, lat := offset(c.lon, c.lat, r.Float64()*2*math.Pi, 60_000*u*u)
		z := edZone{
			Identifier:  fmt.Sprintf("%s-%s-%06d", c.country, kindCode(k.name), i),
			Country:     c.country,
			Name:        fmt.Sprintf("%s %s %d", c.name, k.name, i%997+1),
			Type:        "COMMON",
			Restriction: k.restriction,
			Reason:      []string{k.reason},
			ZoneAuthority: []edAuthority{{Name: "Autorité de l'aviation civile " + c.country, Service: "AUTHORIZATION",
				Email: "uas@" + lowerASCII(c.country) + ".example", SiteURL: "https://uas." + lowerASCII(c.country) + ".example/zones"}},
		}
		z.Applicability = applicability(r)
		if z.Applicability[0].Permanent == "NO" {
			z.Message = "Check the applicability before flight."
		}
		g := edGeometry{LowerVerticalReference: "AGL", UpperVerticalReference: "AGL"}
		if r.IntN(3) == 0 {
			g.UomDimensions = "FT"
			lo, hi := 0.0, float64(100*(1+r.IntN(10)))
			g.LowerLimit, g.UpperLimit = &lo, &hi
		} else {
			g.UomDimensions = "M"
			lo, hi := 0.0, float64(30*(1+r.IntN(10)))
			if r.IntN(4) == 0 { // an AMSL layer over high ground
				g.LowerVerticalReference, g.UpperVerticalReference = "AMSL", "AMSL"
				lo, hi = float64(200+10*r.IntN(50)), float64(900+50*r.IntN(20))
			}
			g.LowerLimit, g.UpperLimit = &lo, &hi
		}
		if k.circle {
			ctr := [2]float64{round(lon, 6), round(lat, 6)}
			g.HorizontalProjection = edProjection{Type: "Circle", Center: &ctr, Radius: math.Round(between(r, k.min, k.max))}
		} else {
			g.HorizontalProjection = edProjection{Type: "Polygon", Coordinates: [][][2]float64{star(r, lon, lat, between(r, k.min, k.max))}}
		}
		z.Geometry = []edGeometry{g}
		zones = append(zones, z)
	}
	doc := struct {
		Title       string   `json:"title"`
		Description string   `json:"description"`
		List        []edZone `json:"UASZoneList"`
	}{fmt.Sprintf("zonegen ED-269 set %d-%d", seed, n), "Generated by nofly's internal/zonegen: names and places real, zones made up.", zones}
	set.Doc = mustJSON(doc)
	set.Zones = n
	return set
}

// applicability is permanent nine times in ten; else a date range in
// 2026-2028, with a daily period half the time.
func applicability(r *rand.Rand) []edApplicability {
	if r.IntN(10) != 0 {
		return []edApplicability{{Permanent: "YES"}}
	}
	from := fmt.Sprintf("2026-%02d-%02dT00:00:00Z", 1+r.IntN(12), 1+r.IntN(28))
	until := fmt.Sprintf("2028-%02d-%02dT00:00:00Z", 1+r.IntN(12), 1+r.IntN(28))
	a := edApplicability{Permanent: "NO", StartDateTime: &from, EndDateTime: &until}
	if r.IntN(2) == 0 {
		days := [][]string{{"SAT", "SUN"}, {"MON", "TUE", "WED", "THU", "FRI"}, {"ANY"}}[r.IntN(3)]
		h := 6 + r.IntN(10)
		a.DailyPeriod = []edDailyPeriod{{Day: days, StartTime: fmt.Sprintf("%02d:00:00Z", h), EndTime: fmt.Sprintf("%02d:30:00Z", h+2+r.IntN(6))}}
	}
	return []edApplicability{a}
}

// star is a closed counter-clockwise ring of 6-40 vertices around (lon,
// lat), at radii between 0.5 and 1 of size metres: its angles increase, so
// it never crosses itself.
func star(r *rand.Rand, lon, lat, size float64) [][2]float64 {
	nv := 6 + r.IntN(35)
	ring := make([][2]float64, 0, nv+1)
	for i := range nv {
		a := (float64(i) + 0.8*r.Float64()) / float64(nv) * 2 * math.Pi
		x, y := offset(lon, lat, a, size*(0.5+0.5*r.Float64()))
		ring = append(ring, [2]float64{round(x, 6), round(y, 6)})
	}
	return append(ring, ring[0])
}

func kindCode(name string) string {
	code := make([]byte, 0, 3)
	for i := 0; i < len(name) && len(code) < 3; i++ {
		if i == 0 || name[i-1] == ' ' {
			code = append(code, name[i]-'a'+'A')
		}
	}
	return string(code)
}

func lowerASCII(s string) string {
	b := []byte(s)
	for i, c := range b {
		if c >= 'A' && c <= 'Z' {
			b[i] = c + 'a' - 'A'
		}
	}
	return string(b)
}

// Positions returns n positions (lon, lat) within the sets' sites' areas,
// where zones are: the load a query benchmark or a soak flies.
func (s *Set) Positions(seed uint64, n int) [][2]float64 {
	r := rand.New(rand.NewPCG(seed, 0x504f53))
	out := make([][2]float64, n)
	for i := range out {
		st := s.Sites[r.IntN(len(s.Sites))]
		x, y := offset(st.Lon, st.Lat, r.Float64()*2*math.Pi, st.RadiusM*math.Sqrt(r.Float64()))
		out[i] = [2]float64{x, y}
	}
	return out
}

const earthR = 6_371_008.8

// offset moves (lon, lat) d metres along bearing a (radians from east,
// counter-clockwise), in the local flat approximation: good to well
// under 1% at the tens of kilometres used here.
func offset(lon, lat, a, d float64) (float64, float64) {
	dLat := d * math.Sin(a) / earthR * 180 / math.Pi
	dLon := d * math.Cos(a) / (earthR * math.Cos(lat*math.Pi/180)) * 180 / math.Pi
	return lon + dLon, lat + dLat
}

func distM(lon1, lat1, lon2, lat2 float64) float64 {
	x := (lon2 - lon1) * math.Pi / 180 * math.Cos((lat1+lat2)/2*math.Pi/180)
	y := (lat2 - lat1) * math.Pi / 180
	return math.Hypot(x, y) * earthR
}

func between(r *rand.Rand, lo, hi float64) float64 { return lo + (hi-lo)*r.Float64() }

func round(v float64, digits int) float64 {
	p := math.Pow10(digits)
	return math.Round(v*p) / p
}

func mustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(fmt.Sprintf("zonegen: %v", err)) // only plain structs: cannot fail
	}
	return b
}
