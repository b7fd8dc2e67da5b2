package geofence

import (
	"math"
	"slices"
	"sync/atomic"

	"github.com/paulmach/orb"
)

// Hit is one zone that contains a point.
type Hit struct {
	Zone *Zone
	// HeightAssumed is true when a vertical limit could not be checked
	// because the position had no height in that limit's reference, or the
	// limit has none (RefUnknown): the position was taken to be within the
	// limit (docs/design.md's vertical test).
	// When several volumes of the zone contain the point, it is false if any
	// of them did not need that assumption.
	HeightAssumed bool
}

const (
	kindPolygon uint8 = iota
	kindCircle
)

// part is one piece of one volume of one zone. What Query reads fills the
// first 64 bytes (one cache line); the rest serves StillInside.
type part struct {
	zone              int32
	bandOff           int32 // polygon: bands are bandStart[bandOff : bandOff+nBands+1]
	nBands            uint16
	kind              uint8
	hasFloor, hasCeil bool
	floorRef, ceilRef Ref
	floor, ceil       float64
	// Shape: for a polygon, bandY0 and bandInv (bands start at latitude
	// bandY0, bandInv bands per degree) in s0, s1; for a circle, centre
	// longitude and latitude, cos(latitude) and the haversine of the
	// angular radius in s0..s3.
	s0, s1, s2, s3 float64

	minX, minY, maxX, maxY float64  // bound, lon/lat degrees, within [-180, 180]
	edgeOff, nEdges        int32    // polygon: edges[edgeOff : edgeOff+nEdges]
	radius                 float64  // circle, metres
	_                      [16]byte // to 128 bytes: the hot half never straddles two cache lines
}

// edge is one polygon edge; ring is the ring's bit (outer = 0).
type edge struct {
	x1, y1, x2, y2 float64
	ring           uint32
}

// Index answers which zones contain a position. It is immutable once built
// and safe for any number of concurrent readers.
type Index struct {
	version     string
	zoneVersion int64 // the zone store's version, 0 without the store
	zones       []*Zone
	byID        map[string]int32
	always      []bool // zone is active at every time
	activity    activity
	zparts      []int32 // parts of zone i: parts[zparts[i]:zparts[i+1]]

	parts     []part
	edges     []edge
	bandStart []uint32 // per part, nBands+1 offsets into bandEdge
	bandEdge  []uint32 // edge indices (global)

	// grid of cells over the parts' extent; cell c holds
	// cells[cellStart[c]:cellStart[c+1]], each with the part's bound (in
	// float32, rounded outwards) so that most candidates are rejected
	// without touching the part.
	gx0, gy0, invCW, invCH float64
	nx, ny                 int
	cellStart              []uint32
	cells                  []cellEntry
}

// NewIndex validates the set and builds its index. The set's zones must not
// be modified afterwards.
func NewIndex(set *ZoneSet) (*Index, error) {
	if set == nil {
		set = &ZoneSet{}
	}
	if err := set.Validate(); err != nil {
		return nil, err
	}
	ix := &Index{
		version:     set.Version,
		zoneVersion: set.ZoneVersion,
		zones:       slices.Clone(set.Zones),
		byID:        make(map[string]int32, len(set.Zones)),
		always:      make([]bool, len(set.Zones)),
		zparts:      make([]int32, len(set.Zones)+1),
	}
	verts, nparts := 0, 0
	for _, z := range set.Zones {
		for _, v := range z.Volumes {
			nparts += 1 + len(v.Area)
			for _, p := range v.Area {
				for _, r := range p {
					verts += len(r)
				}
			}
		}
	}
	ix.parts = make([]part, 0, nparts+nparts/8)
	ix.edges = make([]edge, 0, verts+verts/8)
	ix.bandEdge = make([]uint32, 0, 2*verts)
	ix.bandStart = make([]uint32, 0, verts/4+2*nparts)
	for i, z := range set.Zones {
		if z.Fingerprint == "" {
			z.Fingerprint = z.ComputeFingerprint()
		}
		ix.byID[z.ID] = int32(i)
		ix.always[i] = z.ActiveFrom.IsZero() && z.ActiveUntil.IsZero() && len(z.Windows) == 0
		ix.zparts[i] = int32(len(ix.parts))
		for vi := range z.Volumes {
			if err := ix.addVolume(int32(i), &z.Volumes[vi]); err != nil {
				return nil, err
			}
		}
	}
	ix.zparts[len(set.Zones)] = int32(len(ix.parts))
	ix.activity = newActivity(ix.zones)
	if ix.version == "" {
		ix.version = contentVersion(set.Zones)
	}
	ix.buildGrid()
	return ix, nil
}

func (ix *Index) addVolume(zi int32, v *Volume) error {
	base := part{zone: zi}
	if v.Floor != nil {
		base.hasFloor, base.floor, base.floorRef = true, v.Floor.M, v.Floor.Ref
	}
	if v.Ceiling != nil {
		base.hasCeil, base.ceil, base.ceilRef = true, v.Ceiling.M, v.Ceiling.Ref
	}
	if c := v.Circle; c != nil {
		p := base
		p.kind = kindCircle
		p.s0, p.s1, p.radius = c.Center[0], c.Center[1], c.RadiusM
		p.s2 = math.Cos(p.s1 * deg)
		s := math.Sin(c.RadiusM / earthRadius / 2)
		p.s3 = s * s
		x0, y0, x1, y1 := circleBound(*c)
		p.minY, p.maxY = y0, y1
		// Split a bound that crosses the antimeridian in two parts.
		for k := -1; k <= 1; k++ {
			lo, hi := x0+float64(k)*360, x1+float64(k)*360
			if hi < -180 || lo > 180 {
				continue
			}
			q := p
			q.minX, q.maxX = math.Max(lo, -180), math.Min(hi, 180)
			ix.parts = append(ix.parts, q)
		}
		return nil
	}
	for _, poly := range v.Area {
		pieces, err := framePolygon(poly)
		if err != nil {
			return err
		}
		for _, pc := range pieces {
			ix.addPolygon(base, pc)
		}
	}
	return nil
}

func (ix *Index) addPolygon(p part, poly orb.Polygon) {
	p.kind = kindPolygon
	b := ringBound(poly[0])
	p.minX, p.minY, p.maxX, p.maxY = b.Min[0], b.Min[1], b.Max[0], b.Max[1]
	p.edgeOff = int32(len(ix.edges))
	for ri, r := range poly {
		bit := uint32(ri)
		if len(poly) > 64 {
			// Too many rings for a bit each: fall back to even-odd over
			// all rings, the same for valid polygons.
			bit = 0
		}
		for i := 0; i+1 < len(r); i++ {
			a, c := r[i], r[i+1]
			ix.edges = append(ix.edges, edge{a[0], a[1], c[0], c[1], bit})
		}
	}
	p.nEdges = int32(len(ix.edges)) - p.edgeOff
	nb := int(p.nEdges) / 4
	if nb < 1 {
		nb = 1
	} else if nb > 4096 {
		nb = 4096
	}
	h := p.maxY - p.minY
	p.s0 = p.minY
	if h > 0 {
		p.s1 = float64(nb) / h
	}
	p.nBands = uint16(nb)
	p.bandOff = int32(len(ix.bandStart))
	band := func(y float64) int {
		b := int((y - p.s0) * p.s1)
		if b < 0 {
			return 0
		}
		if b >= nb {
			return nb - 1
		}
		return b
	}
	counts := make([]uint32, nb+1)
	edges := ix.edges[p.edgeOff:]
	for _, e := range edges {
		if e.y1 == e.y2 {
			continue // horizontal edges never cross the ray
		}
		lo, hi := band(math.Min(e.y1, e.y2)), band(math.Max(e.y1, e.y2))
		for b := lo; b <= hi; b++ {
			counts[b+1]++
		}
	}
	start := uint32(len(ix.bandEdge))
	for b := 0; b <= nb; b++ {
		if b > 0 {
			counts[b] += counts[b-1]
		}
		ix.bandStart = append(ix.bandStart, start+counts[b])
	}
	ix.bandEdge = slices.Grow(ix.bandEdge, int(counts[nb]))[:int(start)+int(counts[nb])]
	fill := make([]uint32, nb)
	for ei, e := range edges {
		if e.y1 == e.y2 {
			continue
		}
		lo, hi := band(math.Min(e.y1, e.y2)), band(math.Max(e.y1, e.y2))
		for b := lo; b <= hi; b++ {
			ix.bandEdge[start+counts[b]+fill[b]] = uint32(p.edgeOff) + uint32(ei)
			fill[b]++
		}
	}
	ix.parts = append(ix.parts, p)
}

// buildGrid lays a uniform grid over the parts' extent, with about four cells
// per part, coarsened while large parts make the cell lists too long.
func (ix *Index) buildGrid() {
	if len(ix.parts) == 0 {
		ix.nx, ix.ny = 0, 0
		ix.cellStart = []uint32{0}
		return
	}
	x0, y0, x1, y1 := math.Inf(1), math.Inf(1), math.Inf(-1), math.Inf(-1)
	for i := range ix.parts {
		p := &ix.parts[i]
		x0, y0 = math.Min(x0, p.minX), math.Min(y0, p.minY)
		x1, y1 = math.Max(x1, p.maxX), math.Max(y1, p.maxY)
	}
	w, h := math.Max(x1-x0, 1e-9), math.Max(y1-y0, 1e-9)
	target := float64(4 * len(ix.parts))
	target = math.Max(16, math.Min(target, 1<<22))
	cs := math.Sqrt(w * h / target)
	for attempt := 0; ; attempt++ {
		nx := int(math.Min(math.Ceil(w/cs), 1<<12))
		ny := int(math.Min(math.Ceil(h/cs), 1<<12))
		nx, ny = max(nx, 1), max(ny, 1)
		ix.gx0, ix.gy0 = x0, y0
		ix.invCW, ix.invCH = float64(nx)/w, float64(ny)/h
		ix.nx, ix.ny = nx, ny
		var total int
		for i := range ix.parts {
			cx0, cy0, cx1, cy1 := ix.cellRange(&ix.parts[i])
			total += (cx1 - cx0 + 1) * (cy1 - cy0 + 1)
		}
		if total <= 16*len(ix.parts)+2*nx*ny || attempt == 8 {
			ix.fillGrid(total)
			return
		}
		cs *= 2
	}
}

func (ix *Index) cellX(x float64) int {
	c := int((x - ix.gx0) * ix.invCW)
	return min(max(c, 0), ix.nx-1)
}

func (ix *Index) cellY(y float64) int {
	c := int((y - ix.gy0) * ix.invCH)
	return min(max(c, 0), ix.ny-1)
}

func (ix *Index) cellRange(p *part) (cx0, cy0, cx1, cy1 int) {
	return ix.cellX(p.minX), ix.cellY(p.minY), ix.cellX(p.maxX), ix.cellY(p.maxY)
}

func (ix *Index) fillGrid(total int) {
	n := ix.nx * ix.ny
	ix.cellStart = make([]uint32, n+1)
	for i := range ix.parts {
		cx0, cy0, cx1, cy1 := ix.cellRange(&ix.parts[i])
		for cy := cy0; cy <= cy1; cy++ {
			for cx := cx0; cx <= cx1; cx++ {
				ix.cellStart[cy*ix.nx+cx+1]++
			}
		}
	}
	for c := 1; c <= n; c++ {
		ix.cellStart[c] += ix.cellStart[c-1]
	}
	ix.cells = make([]cellEntry, total)
	fill := make([]uint32, n)
	for i := range ix.parts {
		cx0, cy0, cx1, cy1 := ix.cellRange(&ix.parts[i])
		for cy := cy0; cy <= cy1; cy++ {
			for cx := cx0; cx <= cx1; cx++ {
				c := cy*ix.nx + cx
				p := &ix.parts[i]
				ix.cells[ix.cellStart[c]+fill[c]] = cellEntry{
					minX: down32(p.minX), minY: down32(p.minY), maxX: up32(p.maxX), maxY: up32(p.maxY), part: uint32(i),
				}
				fill[c]++
			}
		}
	}
}

// cellEntry is one part listed in a grid cell.
type cellEntry struct {
	minX, minY, maxX, maxY float32
	part                   uint32
}

// down32 and up32 round to float32 towards -Inf and +Inf.
func down32(v float64) float32 {
	f := float32(v)
	if float64(f) > v {
		f = math.Nextafter32(f, float32(math.Inf(-1)))
	}
	return f
}

func up32(v float64) float32 {
	f := float32(v)
	if float64(f) < v {
		f = math.Nextafter32(f, float32(math.Inf(1)))
	}
	return f
}

// cellOf returns the grid cell of a point, or -1 when it is outside the
// grid.
func (ix *Index) cellOf(x, y float64) int {
	fx := (x - ix.gx0) * ix.invCW
	fy := (y - ix.gy0) * ix.invCH
	if !(fx >= 0 && fy >= 0 && fx <= float64(ix.nx) && fy <= float64(ix.ny)) {
		return -1
	}
	cx, cy := min(int(fx), ix.nx-1), min(int(fy), ix.ny-1)
	return cy*ix.nx + cx
}

// vertical reports whether the heights are within the part's limits widened
// by buf, and whether a limit had to be assumed.
func (p *part) vertical(h *Heights, buf float64) (ok, assumed bool) {
	if p.hasFloor {
		if p.floorRef == RefUnknown {
			ok, a := limitMet(RefUnknown, p.floor, h, true, buf)
			if !ok {
				return false, false
			}
			assumed = assumed || a
		} else if v, known := h.Get(p.floorRef); !known {
			assumed = true
		} else if v < p.floor-buf {
			return false, false
		}
	}
	if p.hasCeil {
		if p.ceilRef == RefUnknown {
			ok, a := limitMet(RefUnknown, p.ceil, h, false, buf)
			if !ok {
				return false, false
			}
			assumed = assumed || a
		} else if v, known := h.Get(p.ceilRef); !known {
			assumed = true
		} else if v > p.ceil+buf {
			return false, false
		}
	}
	return true, assumed
}

// containsXY is the exact horizontal test; x is in [-180, 180) and within
// the part's bound.
func (ix *Index) containsXY(p *part, x, y float64) bool {
	if p.kind == kindCircle {
		s1 := math.Sin((y - p.s1) * (deg / 2))
		s2 := math.Sin((x - p.s0) * (deg / 2))
		a := s1*s1 + p.s2*math.Cos(y*deg)*s2*s2
		return a <= p.s3
	}
	if y >= 90 {
		// The north pole: the crossing test leaves out top edges, so test
		// just below it (a polar cap contains its pole).
		y = 90 - 1e-12
	}
	b := int((y - p.s0) * p.s1)
	if b < 0 {
		b = 0
	} else if b >= int(p.nBands) {
		b = int(p.nBands) - 1
	}
	o := int(p.bandOff) + b
	var mask uint64
	for _, ei := range ix.bandEdge[ix.bandStart[o]:ix.bandStart[o+1]] {
		e := &ix.edges[ei]
		if (e.y1 > y) != (e.y2 > y) && x < (e.x2-e.x1)*(y-e.y1)/(e.y2-e.y1)+e.x1 {
			mask ^= 1 << (e.ring & 63)
		}
	}
	return mask == 1
}

// Query appends to dst[:0] the zones that contain p: horizontally, within
// their vertical limits (docs/design.md's vertical test) and active at p.Time.
// Hits come in the zone set's order, each zone once. It does not allocate
// when dst has room for the hits.
func (ix *Index) Query(p Point, dst []Hit) []Hit {
	dst = dst[:0]
	if ix == nil || len(ix.parts) == 0 {
		return dst
	}
	x, y := normLon(p.Lon), p.Lat
	c := ix.cellOf(x, y)
	if c < 0 {
		return dst
	}
	cells := ix.cells[ix.cellStart[c]:ix.cellStart[c+1]]
	for i := range cells {
		ce := &cells[i]
		if x < float64(ce.minX) || x > float64(ce.maxX) || y < float64(ce.minY) || y > float64(ce.maxY) {
			continue
		}
		// The float32 bound is a little larger than the exact one; the
		// exact tests below are right outside the bound too.
		pt := &ix.parts[ce.part]
		last := len(dst) - 1
		same := last >= 0 && dst[last].Zone == ix.zones[pt.zone]
		if same && !dst[last].HeightAssumed {
			continue // already known to contain p without assumption
		}
		ok, assumed := pt.vertical(&p.Heights, 0)
		if !ok {
			continue
		}
		if !ix.always[pt.zone] && !ix.zones[pt.zone].Active(p.Time) {
			continue
		}
		if !ix.containsXY(pt, x, y) {
			continue
		}
		if same {
			dst[last].HeightAssumed = assumed
			continue
		}
		dst = append(dst, Hit{Zone: ix.zones[pt.zone], HeightAssumed: assumed})
	}
	return dst
}

// StillInside is the hysteresis test for a drone whose alarm for the zone
// is active: it reports whether p is inside the zone or within the zone's
// ClearBufferM of it — horizontally at most the buffer from the zone's area
// and vertically at most the buffer below its floor or above its ceiling,
// in the same volume — with the zone active at p.Time. An unknown zone id
// (say, removed by a reload) is outside.
func (ix *Index) StillInside(zoneID string, p Point) bool {
	if ix == nil {
		return false
	}
	zi, ok := ix.byID[zoneID]
	if !ok {
		return false
	}
	z := ix.zones[zi]
	if !ix.always[zi] && !z.Active(p.Time) {
		return false
	}
	buf := z.ClearBufferM
	x, y := normLon(p.Lon), p.Lat
	if !finite(x) || !finite(y) {
		return false
	}
	// Degrees the buffer can span, for a quick rejection by bound.
	dLat := buf/(earthRadius*deg) + 1e-9
	cl := math.Cos(y * deg)
	dLon := 360.0
	if cl > 1e-6 {
		dLon = math.Min(360, dLat/cl)
	}
	for pi := ix.zparts[zi]; pi < ix.zparts[zi+1]; pi++ {
		pt := &ix.parts[pi]
		if y < pt.minY-dLat || y > pt.maxY+dLat {
			continue
		}
		if dLon < 180 && !lonNear(x, pt.minX-dLon, pt.maxX+dLon) {
			continue
		}
		if ok, _ := pt.vertical(&p.Heights, buf); !ok {
			continue
		}
		if ix.distM(pt, x, y) <= buf {
			return true
		}
	}
	return false
}

// lonNear reports whether x or x±360 is within [lo, hi].
func lonNear(x, lo, hi float64) bool {
	return (x >= lo && x <= hi) || (x+360 >= lo && x+360 <= hi) || (x-360 >= lo && x-360 <= hi)
}

// distM returns the distance in metres from (x, y) to the part's area, 0
// inside it. Polygon distances are measured in a local equirectangular
// projection around the point.
func (ix *Index) distM(p *part, x, y float64) float64 {
	if p.kind == kindCircle {
		return math.Max(0, havDist(x, y, p.s0, p.s1)-p.radius)
	}
	if x >= p.minX && x <= p.maxX && y >= p.minY && y <= p.maxY && ix.containsXY(p, x, y) {
		return 0
	}
	kx := math.Cos(y*deg) * earthRadius * deg
	ky := earthRadius * deg
	d := math.Inf(1)
	for _, e := range ix.edges[p.edgeOff : p.edgeOff+p.nEdges] {
		d = math.Min(d, segDistM(wrap180(e.x1-x)*kx, (e.y1-y)*ky, wrap180(e.x2-x)*kx, (e.y2-y)*ky))
	}
	return d
}

// Zone returns the zone with the given id.
func (ix *Index) Zone(id string) (*Zone, bool) {
	if ix == nil {
		return nil, false
	}
	i, ok := ix.byID[id]
	if !ok {
		return nil, false
	}
	return ix.zones[i], true
}

// Zones returns the zones in the set's order. The slice must not be
// modified.
func (ix *Index) Zones() []*Zone {
	if ix == nil {
		return nil
	}
	return ix.zones
}

// Version returns the zone set's version.
func (ix *Index) Version() string {
	if ix == nil {
		return ""
	}
	return ix.version
}

// ZoneVersion returns the zone set's integer version in the zone store
// (ZoneSet.ZoneVersion), 0 for a set loaded without it. Events carry it.
func (ix *Index) ZoneVersion() int64 {
	if ix == nil {
		return 0
	}
	return ix.zoneVersion
}

// Current holds the index in use; a reload stores a new one and readers
// pick it up on their next Load. The zero value holds no index (Load
// returns nil, and a nil *Index answers every query with no zone).
type Current struct {
	p atomic.Pointer[Index]
}

// Load returns the index in use.
func (c *Current) Load() *Index { return c.p.Load() }

// Store swaps ix in and returns the index it replaces.
func (c *Current) Store(ix *Index) (old *Index) { return c.p.Swap(ix) }

// Changes is what a reload changed, by zone id.
type Changes struct {
	Added, Removed, Changed []string
}

// Diff compares two indexes by zone id and fingerprint. Either may be nil.
func Diff(old, cur *Index) Changes {
	var ch Changes
	for _, z := range cur.Zones() {
		o, ok := old.Zone(z.ID)
		switch {
		case !ok:
			ch.Added = append(ch.Added, z.ID)
		case o.Fingerprint != z.Fingerprint:
			ch.Changed = append(ch.Changed, z.ID)
		}
	}
	for _, z := range old.Zones() {
		if _, ok := cur.Zone(z.ID); !ok {
			ch.Removed = append(ch.Removed, z.ID)
		}
	}
	return ch
}
