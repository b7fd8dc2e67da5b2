package api

import (
	"bytes"
	"encoding/json"
	"math"
	"net/http"
	"strconv"

	"github.com/nofly-dev/nofly/alerts/dronestore"
)

// The positions stream of a viewport (issue 29): a page that sends its
// view (bbox, zoom) receives only the drones inside it, and past
// maxViewDrones of them counts per grid cell instead (clusters), so what a
// stream costs, and what the page draws, grows with what is on screen,
// not with the fleet. Drones with an active alarm are sent one by one
// while there are not more than maxViewDrones of them in view; a cluster
// says how many alarmed drones it holds, so an alarm is never hidden in a
// count without saying so.

const (
	// maxViewDrones is the most drones a viewport's frame names one by
	// one.
	maxViewDrones = 1000
	// maxClusters bounds a clustered frame: the grid's cells grow until
	// the view holds at most this many.
	maxClusters = 4096
	// positionsMaxZoom is the highest zoom a stream accepts (the web map's
	// deepest).
	positionsMaxZoom = 22
)

// posView is a stream's viewport; box nil: every drone, one by one (the
// stream before viewports).
type posView struct {
	box  *dronestore.BBox
	zoom int // -1: not given (the cell is a sixteenth of the box's width)
}

// parsePosView reads bbox and zoom; ok is false when it answered 400.
func parsePosView(w http.ResponseWriter, r *http.Request) (v posView, ok bool) {
	v.zoom = -1
	q := r.URL.Query()
	for _, name := range []string{"bbox", "zoom"} {
		if len(q[name]) > 1 {
			badDroneParam(w, name, "must be given once")
			return v, false
		}
	}
	if q.Has("bbox") {
		b, err := parseBBox(q.Get("bbox"))
		if err != nil {
			badDroneParam(w, "bbox", err.Error())
			return v, false
		}
		v.box = &b
	}
	if q.Has("zoom") {
		z, err := strconv.Atoi(q.Get("zoom"))
		if err != nil || z < 0 || z > positionsMaxZoom || strconv.Itoa(z) != q.Get("zoom") {
			badDroneParam(w, "zoom", "must be an integer from 0 to "+strconv.Itoa(positionsMaxZoom))
			return v, false
		}
		if v.box == nil {
			badDroneParam(w, "zoom", "needs bbox: a zoom without a viewport says nothing")
			return v, false
		}
		v.zoom = z
	}
	return v, true
}

// cell is the side, in degrees, of the grid's cells for the view: 64
// pixels of a 256-pixel tile at the zoom, widened until the box holds at
// most maxClusters cells.
func (v posView) cell() float64 {
	b := v.box
	w, h := b.MaxLon-b.MinLon, b.MaxLat-b.MinLat
	c := w / 16
	if v.zoom >= 0 {
		c = 90 / math.Exp2(float64(v.zoom))
	}
	c = max(c, math.Sqrt(w*h/maxClusters), 1e-6)
	return c
}

// posCluster is one cell of a clustered frame.
type posCluster struct {
	Lat     float64 `json:"lat"` // the mean position of its drones
	Lon     float64 `json:"lon"`
	N       int     `json:"n"`       // drones in it
	Alarmed int     `json:"alarmed"` // of which with an active alarm (not sent one by one)
	Stale   int     `json:"stale"`   // of which not heard for --signal-lost-after
}

// viewStream is what one viewport stream sent.
type viewStream struct {
	v         posView
	shown     map[string]struct{} // the drones the page draws one by one
	clustered bool                // the last frame was clustered
	last      []byte              // the last clustered frame's drones and clusters
}

// frame is the stream's frame for snapshot s, given the last snapshot it
// has (had, 0: none); nil when there is nothing new to send (the caller
// still sends an idle frame now and then). Unclustered frames after the
// first are deltas: the drones in view that changed since had, and
// "gone", those the page drew that left the view.
func (vs *viewStream) frame(s *posSnap, had uint64) []byte {
	b := vs.v.box
	var in []*posEntry
	for _, e := range s.drones {
		if b.Contains(e.lat, e.lon) {
			in = append(in, e)
		}
	}
	if len(in) > maxViewDrones {
		return vs.clusteredFrame(s, in)
	}
	full := had == 0 || vs.clustered
	vs.clustered, vs.last = false, nil
	var send []*posEntry
	now := make(map[string]struct{}, len(in))
	for _, e := range in {
		now[e.id] = struct{}{}
		if _, drawn := vs.shown[e.id]; full || !drawn || e.changed > had {
			send = append(send, e)
		}
	}
	var gone []string
	if !full {
		for id := range vs.shown {
			if _, ok := now[id]; !ok {
				gone = append(gone, id)
			}
		}
	}
	vs.shown = now
	if !full && len(send) == 0 && len(gone) == 0 {
		return nil
	}
	return s.viewFrame(full, false, len(in), send, gone, nil)
}

// clusteredFrame is a full frame of the alarmed drones in view (up to
// maxViewDrones) and the others counted per cell.
func (vs *viewStream) clusteredFrame(s *posSnap, in []*posEntry) []byte {
	c := vs.v.cell()
	type key struct{ x, y int64 }
	cells := map[key]*posCluster{}
	var order []key
	var one []*posEntry
	alarmed := 0
	for _, e := range in {
		if e.alarmed {
			alarmed++
		}
	}
	for _, e := range in {
		if e.alarmed && alarmed <= maxViewDrones {
			one = append(one, e)
			continue
		}
		k := key{int64(math.Floor(e.lon / c)), int64(math.Floor(e.lat / c))}
		cl := cells[k]
		if cl == nil {
			cl = &posCluster{}
			cells[k] = cl
			order = append(order, k)
		}
		cl.N++
		cl.Lat += e.lat
		cl.Lon += e.lon
		if e.alarmed {
			cl.Alarmed++
		}
		if e.stale {
			cl.Stale++
		}
	}
	clusters := make([]posCluster, len(order))
	for i, k := range order {
		cl := cells[k]
		cl.Lat, cl.Lon = round6(cl.Lat/float64(cl.N)), round6(cl.Lon/float64(cl.N))
		clusters[i] = *cl
	}
	f := s.viewFrame(true, true, len(in), one, nil, clusters)
	// The same drones and clusters as last time: nothing to send.
	body := f[bytes.Index(f, []byte(`,"drones":`)):]
	if vs.clustered && bytes.Equal(body, vs.last) {
		return nil
	}
	vs.clustered, vs.last, vs.shown = true, body, nil
	return f
}

func round6(f float64) float64 { return math.Round(f*1e6) / 1e6 }

// viewFrame is a viewport's positions event: the frame of posSnap.frame
// with "clustered", "in_view" (drones in the view), "gone" and
// "clusters".
func (s *posSnap) viewFrame(full, clustered bool, inView int, drones []*posEntry, gone []string, clusters []posCluster) []byte {
	at, _ := json.Marshal(s.at)
	gj, _ := json.Marshal(gone)
	if gone == nil {
		gj = []byte("[]")
	}
	cj, _ := json.Marshal(clusters)
	if clusters == nil {
		cj = []byte("[]")
	}
	n := 160 + len(at) + len(gj) + len(cj)
	for _, d := range drones {
		n += len(d.json) + 1
	}
	b := make([]byte, 0, n)
	b = append(b, `event: positions`+"\n"+`data: {"at":`...)
	b = append(b, at...)
	b = append(b, `,"zone_version":`...)
	b = strconv.AppendInt(b, s.zv, 10)
	b = append(b, `,"full":`...)
	b = strconv.AppendBool(b, full)
	b = append(b, `,"clustered":`...)
	b = strconv.AppendBool(b, clustered)
	b = append(b, `,"in_view":`...)
	b = strconv.AppendInt(b, int64(inView), 10)
	b = append(b, `,"drones":[`...)
	for i, d := range drones {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, d.json...)
	}
	b = append(b, `],"gone":`...)
	b = append(b, gj...)
	b = append(b, `,"clusters":`...)
	b = append(b, cj...)
	return append(b, "}\n\n"...)
}
