package benchcompare

import (
	"hash/fnv"
	"strconv"

	"github.com/nofly-dev/nofly/internal/scenario"
	"github.com/nofly-dev/nofly/telemetry"
)

// stream is the benchmark's records, split over the clients, encoded for
// both sides before anything is timed: each client owns a fixed set of
// drones and sends its records in stream order, so every drone's records
// reach either side in the order of the stream, which is the order the
// reference (`alerter replay` over the whole stream) sees them in.
type stream struct {
	records int
	ndjson  []byte     // the whole stream, for the reference
	bodies  [][][]byte // per client, per batch: an NDJSON request body
	counts  [][]int    // per client, per batch: records in it

	perClient [][]telemetry.Position
}

// clientOf is the client that sends drone id's records.
func clientOf(id string, clients int) int {
	h := fnv.New32a()
	h.Write([]byte(id))
	return int(h.Sum32() % uint32(clients))
}

func newStream(sc *scenario.Scenario, clients, batch int) *stream {
	s := &stream{records: len(sc.Records), ndjson: sc.NDJSON(),
		bodies: make([][][]byte, clients), counts: make([][]int, clients)}
	per := make([][]telemetry.Position, clients)
	for _, p := range sc.Records {
		c := clientOf(p.DroneID, clients)
		per[c] = append(per[c], p)
	}
	for c, ps := range per {
		for i := 0; i < len(ps); i += batch {
			chunk := ps[i:min(i+batch, len(ps))]
			var b []byte
			for j := range chunk {
				b = chunk[j].AppendJSON(b)
				b = append(b, '\n')
			}
			s.bodies[c] = append(s.bodies[c], b)
			s.counts[c] = append(s.counts[c], len(chunk))
		}
	}
	s.perClient = per
	return s
}

// tile38Sets encodes every client's batches as pipelined
// `SET key id FIELD seq N POINT lat lon`.
func (s *stream) tile38Sets(key string) [][][]byte {
	out := make([][][]byte, len(s.perClient))
	for c, ps := range s.perClient {
		for _, n := range s.counts[c] {
			var b []byte
			for _, p := range ps[:n] {
				b = appendCommand(b, "SET", key, p.DroneID, "FIELD", "seq", strconv.FormatInt(p.Seq, 10),
					"POINT", strconv.FormatFloat(p.Lat, 'f', -1, 64), strconv.FormatFloat(p.Lon, 'f', -1, 64))
			}
			out[c] = append(out[c], b)
			ps = ps[n:]
		}
	}
	return out
}
