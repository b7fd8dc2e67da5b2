package api

import (
	"bytes"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"math"
	"slices"
	"strconv"
	"sync"

	"github.com/paulmach/orb"

	"github.com/nofly-dev/nofly/alerts/dronestore"
	"github.com/nofly-dev/nofly/geofence"
)

// GET /v1/map/zones?bbox=&zoom=: the zones a map view shows, simplified for
// its zoom, never smaller than they are (issue 29). A page shows one view
// of a set of up to 100,000 zones; sending it the whole set (about 3 MB per
// 10,000 zones) costs every page seconds before its first paint.
//
// Per zone version one viewIndex is built (a grid of the volumes' bounds)
// and its answers are kept by (bbox, zoom), so the pages looking at the
// same views cost one encoding.

const (
	// viewMaxBytes bounds an answer: past it, the view is answered reduced.
	viewMaxBytes = 500_000
	// viewMaxFeatures: a view holding more is answered reduced without
	// encoding it all first (a feature takes 200 bytes at the least).
	viewMaxFeatures = 2_500
	// A reduced answer draws the volumes at least viewMinPx wide, the
	// largest first, within viewReducedBytes, and groups the rest into at
	// most viewClusterGrid² boxes of the view (about 100 bytes each).
	viewReducedBytes = 300_000
	viewMinPx        = 16
	viewClusterGrid  = 32
	// viewTolPx is the simplification's tolerance: a drawn zone is at most
	// this many pixels larger than the real one at the zoom asked.
	viewTolPx = 1.0
	// viewCell is the grid's cell in degrees; a volume over more than
	// viewBigCells cells is kept in a list every query reads.
	viewCell     = 0.05
	viewBigCells = 1024
	// viewCacheBytes bounds the answers kept per version.
	viewCacheBytes = 32 << 20
	// maxZoom is the deepest zoom asked (Leaflet's and OSM's tiles stop at 22).
	maxZoom = 22
)

// viewFeat is one volume of one zone, as a view draws it.
type viewFeat struct {
	zone   *geofence.Zone
	vol    int
	bound  orb.Bound // outward; the whole band of longitudes for a ring across the antimeridian
	wraps  bool      // a ring crosses the antimeridian: intersects by its bound
	circle *geofence.Circle
	area   orb.MultiPolygon
}

// viewIndex is one zone version ready for views.
type viewIndex struct {
	version int64
	zones   int
	feats   []viewFeat
	cells   map[int64][]int32 // grid cell → features whose bound meets it
	big     []int32
	set     orb.Bound
	hasSet  bool

	mu         sync.Mutex
	answers    map[string][]byte // by viewKey
	order      []string          // insertion order, for eviction
	cacheBytes int
}

// viewParams is a view asked for.
type viewParams struct {
	box  dronestore.BBox
	zoom int
}

// key is the canonical form of the view (shortest decimals).
func (p viewParams) key() string {
	f := func(x float64) string { return strconv.FormatFloat(x, 'f', -1, 64) }
	return f(p.box.MinLon) + "," + f(p.box.MinLat) + "," + f(p.box.MaxLon) + "," + f(p.box.MaxLat) + "/" + strconv.Itoa(p.zoom)
}

// viewTag is the ETag of a view of a version: one per (version, bbox, zoom),
// distinct from the whole set's "<version>".
func viewTag(version int64, p viewParams) string {
	h := fnv.New64a()
	h.Write([]byte(p.key()))
	return `"` + strconv.FormatInt(version, 10) + "-" + strconv.Itoa(p.zoom) + "-" + strconv.FormatUint(h.Sum64(), 16) + `"`
}

// pixelDeg is one pixel of a Web Mercator map at zoom z, in degrees of
// longitude.
func pixelDeg(z int) float64 { return 360 / 256 / math.Exp2(float64(z)) }

func cellOf(x float64) int32 { return int32(math.Floor(x / viewCell)) }

func cellKey(cx, cy int32) int64 { return int64(cx)<<32 | int64(uint32(cy)) }

// newViewIndex indexes set's volumes by their bounds.
func newViewIndex(version int64, set *geofence.ZoneSet) *viewIndex {
	vi := &viewIndex{version: version, zones: len(set.Zones), cells: map[int64][]int32{}, answers: map[string][]byte{}}
	for _, z := range set.Zones {
		for i := range z.Volumes {
			v := &z.Volumes[i]
			f := viewFeat{zone: z, vol: i}
			switch {
			case len(v.Area) > 0:
				f.area = v.Area
				f.bound, f.wraps = areaBound(v.Area)
			case v.Circle != nil:
				f.circle = v.Circle
				f.bound = circleBound(v.Circle)
			default:
				continue
			}
			if vi.hasSet {
				vi.set = vi.set.Union(f.bound)
			} else {
				vi.set, vi.hasSet = f.bound, true
			}
			vi.feats = append(vi.feats, f)
		}
	}
	for i, f := range vi.feats {
		x0, y0, x1, y1 := cellOf(f.bound.Min[0]), cellOf(f.bound.Min[1]), cellOf(f.bound.Max[0]), cellOf(f.bound.Max[1])
		if int64(x1-x0+1)*int64(y1-y0+1) > viewBigCells {
			vi.big = append(vi.big, int32(i))
			continue
		}
		for cx := x0; cx <= x1; cx++ {
			for cy := y0; cy <= y1; cy++ {
				k := cellKey(cx, cy)
				vi.cells[k] = append(vi.cells[k], int32(i))
			}
		}
	}
	return vi
}

// areaBound is the bound of an area's outer rings; a ring across the
// antimeridian (an edge longer than 180° of longitude, as the engine reads
// it) takes every longitude.
func areaBound(mp orb.MultiPolygon) (orb.Bound, bool) {
	b := mp.Bound()
	for _, p := range mp {
		for _, r := range p {
			for i := 1; i < len(r); i++ {
				if math.Abs(r[i][0]-r[i-1][0]) > 180 {
					b.Min[0], b.Max[0] = -180, 180
					return b, true
				}
			}
		}
	}
	return b, false
}

// circleBound is a circle's bound in degrees, rounded outwards.
func circleBound(c *geofence.Circle) orb.Bound {
	dLat := c.RadiusM/orb.EarthRadius*180/math.Pi*1.001 + 1e-7
	lat := c.Center[1]
	cos := math.Cos(math.Min(89.9, math.Abs(lat)+dLat) * math.Pi / 180)
	dLon := math.Min(180, dLat/cos)
	return orb.Bound{Min: orb.Point{math.Max(-180, c.Center[0]-dLon), math.Max(-90, lat-dLat)},
		Max: orb.Point{math.Min(180, c.Center[0]+dLon), math.Min(90, lat+dLat)}}
}

// boxBound is a bbox as an orb.Bound.
func boxBound(b dronestore.BBox) orb.Bound {
	return orb.Bound{Min: orb.Point{b.MinLon, b.MinLat}, Max: orb.Point{b.MaxLon, b.MaxLat}}
}

// intersects reports whether the volume's area (edges included) meets the
// box: a circle whose nearest point of the box is within its radius, or a
// polygon with an edge in the box or the box inside it.
func (f *viewFeat) intersects(box orb.Bound) bool {
	if !f.bound.Intersects(box) {
		return false
	}
	if f.circle != nil {
		c := f.circle.Center
		q := orb.Point{math.Max(box.Min[0], math.Min(box.Max[0], c[0])), math.Max(box.Min[1], math.Min(box.Max[1], c[1]))}
		return haversineM(c, q) <= f.circle.RadiusM*1.0001+0.5 // rounded outwards: a zone drawn needlessly costs bytes, one missing misleads
	}
	if f.wraps {
		return true
	}
	for _, p := range f.area {
		if polygonMeetsBox(p, box) {
			return true
		}
	}
	return false
}

func haversineM(a, b orb.Point) float64 {
	const r = math.Pi / 180
	dLat, dLon := (b[1]-a[1])*r, (b[0]-a[0])*r
	h := math.Sin(dLat/2)*math.Sin(dLat/2) + math.Cos(a[1]*r)*math.Cos(b[1]*r)*math.Sin(dLon/2)*math.Sin(dLon/2)
	return 2 * orb.EarthRadius * math.Asin(math.Min(1, math.Sqrt(h)))
}

// polygonMeetsBox: an edge of p meets box, or box lies inside p (even-odd
// over its rings, as the engine reads them).
func polygonMeetsBox(p orb.Polygon, box orb.Bound) bool {
	for _, r := range p {
		for i := 1; i < len(r); i++ {
			if segmentMeetsBox(r[i-1], r[i], box) {
				return true
			}
		}
	}
	// No edge in the box: it is all inside or all outside; its corner says.
	in := false
	for _, r := range p {
		if ringHas(r, box.Min) {
			in = !in
		}
	}
	return in
}

func ringHas(r orb.Ring, pt orb.Point) bool {
	in := false
	for i, j := 0, len(r)-1; i < len(r); j, i = i, i+1 {
		a, b := r[i], r[j]
		if (a[1] > pt[1]) != (b[1] > pt[1]) && pt[0] < (b[0]-a[0])*(pt[1]-a[1])/(b[1]-a[1])+a[0] {
			in = !in
		}
	}
	return in
}

// segmentMeetsBox: segment a-b has a point in box (Liang-Barsky clipping).
func segmentMeetsBox(a, b orb.Point, box orb.Bound) bool {
	t0, t1 := 0.0, 1.0
	dx, dy := b[0]-a[0], b[1]-a[1]
	for _, c := range [4][2]float64{{-dx, a[0] - box.Min[0]}, {dx, box.Max[0] - a[0]}, {-dy, a[1] - box.Min[1]}, {dy, box.Max[1] - a[1]}} {
		p, q := c[0], c[1]
		if p == 0 {
			if q < 0 {
				return false
			}
			continue
		}
		t := q / p
		if p < 0 {
			t0 = math.Max(t0, t)
		} else {
			t1 = math.Min(t1, t)
		}
		if t0 > t1 {
			return false
		}
	}
	return true
}

// query is the features meeting box, in set order.
func (vi *viewIndex) query(box orb.Bound) []int32 {
	var out []int32
	for _, i := range vi.big {
		if vi.feats[i].intersects(box) {
			out = append(out, i)
		}
	}
	qx0, qy0, qx1, qy1 := cellOf(box.Min[0]), cellOf(box.Min[1]), cellOf(box.Max[0]), cellOf(box.Max[1])
	// A feature is taken in the first cell of the box it meets, so once.
	visit := func(cx, cy int32, list []int32) {
		for _, i := range list {
			f := &vi.feats[i]
			if cx != max(qx0, cellOf(f.bound.Min[0])) || cy != max(qy0, cellOf(f.bound.Min[1])) {
				continue
			}
			if f.intersects(box) {
				out = append(out, i)
			}
		}
	}
	if int64(qx1-qx0+1)*int64(qy1-qy0+1) > int64(len(vi.cells)) {
		for k, list := range vi.cells {
			cx, cy := int32(k>>32), int32(uint32(k))
			if cx >= qx0 && cx <= qx1 && cy >= qy0 && cy <= qy1 {
				visit(cx, cy, list)
			}
		}
	} else {
		for cx := qx0; cx <= qx1; cx++ {
			for cy := qy0; cy <= qy1; cy++ {
				visit(cx, cy, vi.cells[cellKey(cx, cy)])
			}
		}
	}
	slices.Sort(out)
	return out
}

// answer is the encoded view, from the version's cache when asked before.
func (vi *viewIndex) answer(p viewParams) ([]byte, error) {
	k := p.key()
	vi.mu.Lock()
	b, ok := vi.answers[k]
	vi.mu.Unlock()
	if ok {
		return b, nil
	}
	b, err := vi.encode(p)
	if err != nil {
		return nil, err
	}
	vi.mu.Lock()
	if _, ok := vi.answers[k]; !ok {
		vi.answers[k] = b
		vi.order = append(vi.order, k)
		vi.cacheBytes += len(b)
		for vi.cacheBytes > viewCacheBytes && len(vi.order) > 1 {
			vi.cacheBytes -= len(vi.answers[vi.order[0]])
			delete(vi.answers, vi.order[0])
			vi.order = vi.order[1:]
		}
	}
	vi.mu.Unlock()
	return b, nil
}

// viewCluster is a box holding volumes a reduced answer does not draw:
// the union of their bounds, so never smaller than they are.
type viewCluster struct {
	bound                orb.Bound
	count, restricted, w int
}

// encode answers view p: every volume meeting the box, simplified for the
// zoom; reduced past viewMaxFeatures or viewMaxBytes.
func (vi *viewIndex) encode(p viewParams) ([]byte, error) {
	box := boxBound(p.box)
	hits := vi.query(box)
	tol := viewTolPx * pixelDeg(p.zoom)
	if len(hits) <= viewMaxFeatures {
		var feats bytes.Buffer
		for n, i := range hits {
			if n > 0 {
				feats.WriteByte(',')
			}
			if err := vi.feature(&feats, i, tol); err != nil {
				return nil, err
			}
			if feats.Len() > viewMaxBytes {
				break
			}
		}
		if feats.Len() <= viewMaxBytes-1000 {
			return vi.envelope(p, len(hits), false, feats.Bytes(), nil), nil
		}
	}
	// Reduced: the volumes that show as more than a dot, largest first, as
	// far as the budget goes; the rest in boxes.
	px := pixelDeg(p.zoom)
	type sized struct {
		i    int32
		size float64 // on the map, pixels
	}
	var big []sized
	for _, i := range hits {
		b := vi.feats[i].bound
		w := math.Max(b.Max[0]-b.Min[0], (b.Max[1]-b.Min[1])/math.Max(0.01, math.Cos((b.Min[1]+b.Max[1])/2*math.Pi/180))) / px
		if w >= viewMinPx {
			big = append(big, sized{i, w})
		}
	}
	slices.SortFunc(big, func(a, b sized) int {
		if a.size != b.size {
			if a.size > b.size {
				return -1
			}
			return 1
		}
		return int(a.i - b.i)
	})
	var feats bytes.Buffer
	drawn := map[int32]bool{}
	var one bytes.Buffer
	for _, x := range big {
		i := x.i
		one.Reset()
		if err := vi.feature(&one, i, tol); err != nil {
			return nil, err
		}
		if feats.Len()+one.Len()+1 > viewReducedBytes {
			break
		}
		if feats.Len() > 0 {
			feats.WriteByte(',')
		}
		feats.Write(one.Bytes())
		drawn[i] = true
	}
	cw := (box.Max[0] - box.Min[0]) / viewClusterGrid
	ch := (box.Max[1] - box.Min[1]) / viewClusterGrid
	cell := func(x, lo, w float64) int {
		if w <= 0 {
			return 0
		}
		return min(viewClusterGrid-1, max(0, int((x-lo)/w)))
	}
	clusters := map[int]*viewCluster{}
	for _, i := range hits {
		if drawn[i] {
			continue
		}
		f := &vi.feats[i]
		c := f.bound.Center()
		k := cell(c[1], box.Min[1], ch)*viewClusterGrid + cell(c[0], box.Min[0], cw)
		cl := clusters[k]
		if cl == nil {
			cl = &viewCluster{bound: f.bound}
			clusters[k] = cl
		}
		cl.bound = cl.bound.Union(f.bound)
		cl.count++
		if f.zone.Category == geofence.Restricted {
			cl.restricted++
		} else {
			cl.w++
		}
	}
	keys := make([]int, 0, len(clusters))
	for k := range clusters {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	var cb bytes.Buffer
	for n, k := range keys {
		c := clusters[k]
		if n > 0 {
			cb.WriteByte(',')
		}
		cb.WriteString(`{"bbox":`)
		appendBound(&cb, c.bound)
		fmt.Fprintf(&cb, `,"count":%d,"restricted":%d,"warning":%d}`, c.count, c.restricted, c.w)
	}
	return vi.envelope(p, len(hits), true, feats.Bytes(), cb.Bytes()), nil
}

func appendBound(b *bytes.Buffer, x orb.Bound) {
	b.WriteByte('[')
	for i, v := range [4]float64{x.Min[0], x.Min[1], x.Max[0], x.Max[1]} {
		if i > 0 {
			b.WriteByte(',')
		}
		b.Write(strconv.AppendFloat(nil, v, 'f', -1, 64))
	}
	b.WriteByte(']')
}

// envelope is the answer around its features and clusters.
func (vi *viewIndex) envelope(p viewParams, inView int, reduced bool, feats, clusters []byte) []byte {
	var b bytes.Buffer
	b.Grow(len(feats) + len(clusters) + 256)
	fmt.Fprintf(&b, `{"type":"FeatureCollection","zone_version":%d,"zones":%d,"bbox":`, vi.version, vi.zones)
	appendBound(&b, boxBound(p.box))
	fmt.Fprintf(&b, `,"zoom":%d,"set_bbox":`, p.zoom)
	if vi.hasSet {
		appendBound(&b, vi.set)
	} else {
		b.WriteString("null")
	}
	fmt.Fprintf(&b, `,"in_view":%d,"reduced":%t,"features":[`, inView, reduced)
	b.Write(feats)
	b.WriteString(`],"clusters":[`)
	b.Write(clusters)
	b.WriteString("]}\n")
	return b.Bytes()
}

// feature writes volume i as a GeoJSON feature: its polygons simplified
// outwards with tolerance tol (oriented for the nonzero fill rule), a
// circle as its centre and radius_m as in the whole set's answer.
func (vi *viewIndex) feature(b *bytes.Buffer, i int32, tol float64) error {
	f := &vi.feats[i]
	props, err := json.Marshal(drawnPropsOf(f.zone, f.vol))
	if err != nil {
		return fmt.Errorf("encode zone %s: %w", f.zone.ID, err)
	}
	id, _ := json.Marshal(f.zone.ID + "#" + strconv.Itoa(f.vol))
	b.WriteString(`{"type":"Feature","id":`)
	b.Write(id)
	b.WriteString(`,"geometry":`)
	num := func(x float64) { b.Write(strconv.AppendFloat(b.AvailableBuffer(), x, 'f', -1, 64)) }
	if f.circle != nil {
		b.WriteString(`{"type":"Point","coordinates":[`)
		num(f.circle.Center[0])
		b.WriteByte(',')
		num(f.circle.Center[1])
		b.WriteString(`]}`)
	} else {
		b.WriteString(`{"type":"MultiPolygon","coordinates":[`)
		area := f.area
		if f.wraps {
			area = unwrapArea(area) // simplified where it is continuous, drawn there too
		}
		for pi, p := range geofence.SimplifyOutward(area, tol) {
			if pi > 0 {
				b.WriteByte(',')
			}
			b.WriteByte('[')
			for ri, r := range p {
				if ri > 0 {
					b.WriteByte(',')
				}
				b.WriteByte('[')
				for k, pt := range r {
					if k > 0 {
						b.WriteByte(',')
					}
					b.WriteByte('[')
					num(pt[0])
					b.WriteByte(',')
					num(pt[1])
					b.WriteByte(']')
				}
				b.WriteByte(']')
			}
			b.WriteByte(']')
		}
		b.WriteString(`]}`)
	}
	b.WriteString(`,"properties":`)
	b.Write(props)
	b.WriteByte('}')
	return nil
}

// unwrapArea makes each ring's longitudes continuous across the
// antimeridian (an edge longer than 180° goes the short way, as the engine
// reads it); the page draws such a ring where it lies.
func unwrapArea(mp orb.MultiPolygon) orb.MultiPolygon {
	out := make(orb.MultiPolygon, len(mp))
	for i, p := range mp {
		out[i] = make(orb.Polygon, len(p))
		for j, r := range p {
			u := make(orb.Ring, len(r))
			shift := 0.0
			for k, pt := range r {
				if k > 0 {
					if d := pt[0] - r[k-1][0]; d > 180 {
						shift -= 360
					} else if d < -180 {
						shift += 360
					}
				}
				u[k] = orb.Point{pt[0] + shift, pt[1]}
			}
			out[i][j] = u
		}
	}
	return out
}
