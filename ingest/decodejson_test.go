package ingest

import (
	"bytes"
	"fmt"
	"reflect"
	"testing"
	"time"
)

// jsonArraySeeds are bodies for FuzzDecodeJSONMatchesStd and the table
// below: arrays that the splitter reads and arrays it must hand back.
var jsonArraySeeds = []string{
	`[{"drone_id":"A","seq":1,"ts":"2026-12-04T10:00:00Z","lat":51.47,"lon":-0.46}]`,
	` [ {"drone_id":"A","seq":1,"ts":"2026-12-04T10:00:00Z","lat":51.47,"lon":-0.46} ,` + "\n\t" + `{"drone_id":"B","seq":2,"ts":"2026-12-04T10:00:01Z","lat":51.4,"lon":-0.4,"alt_m":90} ] `,
	`[{"drone_id":"A\"]}","seq":1,"ts":"2026-12-04T10:00:00Z","lat":51.47,"lon":-0.46}]`,
	`[{"drone_id":"A","seq":1,"ts":"2026-12-04T10:00:00Z","lat":51.47,"lon":-0.46,"extra":{"a":[1,{"b":"]"}]}}]`,
	`[{"drone_id":"A","seq":1,"ts":"2026-12-04T10:00:00Z","lat":51.47,"lon":-0.46,"speed_mps":"fast"}]`,
	`[{"drone_id":"A","seq":1,"ts":"2026-12-04T10:00:00Z","lat":51.47,"lon":-0.46,"operator":{"lat":51.469,"lon":-0.452,"type":"fixed"}},{"drone_id":"B","seq":1,"ts":"2026-12-04T10:00:00Z","lat":51.47,"lon":-0.46,"operator":{"lat":"]"}}]`,
	`[{"drone_id":"A","seq":1,"ts":"2026-12-04T10:00:00Z","lat":51.47,"lon":-0.46} {"drone_id":"B"}]`,
	`[{"drone_id":"A","seq":1,"ts":"2026-12-04T10:00:00Z","lat":51.47,"lon":-0.46},]`,
	`[{"drone_id":"A","seq":1,"ts":"2026-12-04T10:00:00Z","lat":51.47,"lon":-0.46}] x`,
	`[{"drone_id":"A","seq":1,"ts":"2026-12-04T10:00:00Z","lat":51.47,"lon":-0.46}`,
	`[{"drone_id":"A","seq":1}]`,
	`[{"drone_id":"A","seq":1,"ts":"2026-12-04T10:00:00Z","lat":91,"lon":-0.46}]`,
	`[1, 2]`, `[]`, `[ ]`, `[`, `[,]`, `[{]`, `[{"a":"\`, `[{"a":"\\"}]`, "[\v{}]", `[{}]`, `[null]`, `[[]]`,
	`{"drone_id":"A","seq":1,"ts":"2026-12-04T10:00:00Z","lat":51.47,"lon":-0.46}`,
	"\ufeff" + `[{"drone_id":"A","seq":1,"ts":"2026-12-04T10:00:00Z","lat":51.47,"lon":-0.46}]`,
}

func jsonTestOpts() decodeOpts {
	return decodeOpts{lim: Limits{MaxBodyBytes: DefaultMaxBodyBytes, MaxRecords: 3, MaxLineBytes: 200},
		now: time.Date(2026, 12, 4, 10, 0, 0, 0, time.UTC), maxAhead: DefaultMaxClockSkewAhead, maxAge: 24 * time.Hour}
}

func sameDecode(t *testing.T, body []byte) {
	t.Helper()
	o := jsonTestOpts()
	gb, gr := decodeJSON(body, o)
	wb, wr := decodeJSONStd(body, o)
	if !reflect.DeepEqual(gb, wb) || !reflect.DeepEqual(gr, wr) {
		t.Fatalf("body %q:\ndecodeJSON    %+v %+v\ndecodeJSONStd %+v %+v", body, gb, gr, wb, wr)
	}
}

// TestDecodeJSONMatchesStd: the splitter's path gives encoding/json's
// answer for every seed, every prefix of each and every one-byte deletion
// — and a large valid array goes through the splitter (the point of it).
func TestDecodeJSONMatchesStd(t *testing.T) {
	for _, s := range jsonArraySeeds {
		b := []byte(s)
		sameDecode(t, b)
		for i := range b {
			sameDecode(t, b[:i])
			sameDecode(t, append(append([]byte(nil), b[:i]...), b[i+1:]...))
		}
	}
	var big bytes.Buffer
	big.WriteByte('[')
	for i := range 3 {
		if i > 0 {
			big.WriteByte(',')
		}
		fmt.Fprintf(&big, `{"drone_id":"D%d","seq":%d,"ts":"2026-12-04T10:00:00Z","lat":51.47,"lon":-0.46}`, i, i+1)
	}
	big.WriteByte(']')
	calls := 0
	if !arrayElements(big.Bytes(), func(int, []byte) bool { calls++; return true }) || calls != 3 {
		t.Errorf("a well-formed array of 3 was not split (%d elements)", calls)
	}
	sameDecode(t, big.Bytes())
}

// FuzzDecodeJSONMatchesStd: for any body, decodeJSON (splitter first)
// answers exactly as encoding/json's Decoder path does.
func FuzzDecodeJSONMatchesStd(f *testing.F) {
	for _, s := range jsonArraySeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) { sameDecode(t, body) })
}
