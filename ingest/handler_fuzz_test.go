package ingest

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/nofly-dev/nofly/telemetry"
)

// fuzzNow is the receive time of the fuzzed requests: the seeds' ts are
// around it, so the clock bounds keep and refuse some of them.
var fuzzNow = time.Date(2026, 12, 2, 10, 16, 0, 0, time.UTC)

// Content types and encodings the fuzzer picks from by index; the last of
// each is the fuzzer's own string.
var (
	fuzzTypes     = []string{"application/x-ndjson", "application/json", "application/ndjson", "application/json; charset=utf-8", "text/plain", ""}
	fuzzEncodings = []string{"", "gzip", "identity", "gzip, identity", "br", "x-gzip"}
	fuzzRoutes    = []string{"/v1/telemetry", RouteRID, RouteODID, "/v1/telemetry/", "/metrics"}
)

// FuzzHandler drives ingest's whole HTTP handler — route, method, body,
// Content-Type, Content-Encoding (the body gzipped or not), Authorization —
// and holds every answer to the contract: never a 5xx or a panic, always a
// JSON answer, and a partly valid body loses nothing valid unsaid. A 202
// produced exactly the body's records, each as the independent decoder
// reads it (what ingest dropped named in "dropped"); a 400 produced
// nothing, and every line it names is one the independent decoder refuses.
func FuzzHandler(f *testing.F) {
	fuzzHandler(f)
}

// TestFuzzHandlerReachesTheHandler: the fuzz target's requests get past
// the Host check and the loopback rule, or it would fuzz only the guard.
func TestFuzzHandlerReachesTheHandler(t *testing.T) {
	fp := &fakeProducer{}
	s, err := NewServer(Options{Producer: fp, Logger: slogDiscard(), Now: func() time.Time { return fuzzNow }})
	if err != nil {
		t.Fatal(err)
	}
	req := httptest.NewRequest(http.MethodPost, "/v1/telemetry",
		strings.NewReader(`{"drone_id":"D1","seq":1,"ts":"2026-12-02T10:15:03Z","lat":51.47,"lon":-0.46}`))
	req.Host, req.RemoteAddr = "127.0.0.1:8080", "127.0.0.1:40000"
	req.Header.Set("Content-Type", "application/x-ndjson")
	w := httptest.NewRecorder()
	s.ServeHTTP(w, req)
	if w.Code != http.StatusAccepted || len(fp.produced()) != 1 {
		t.Fatalf("%d %s: the fuzz target's request shape does not reach the handler", w.Code, w.Body.Bytes())
	}
}

func fuzzHandler(f *testing.F) {
	good := `{"drone_id":"D1","seq":1,"ts":"2026-12-02T10:15:03Z","lat":51.47,"lon":-0.46,"alt_m":80}`
	bad := `{"drone_id":"D1","seq":-1,"ts":"2026-12-02T10:15:03Z","lat":51.47,"lon":-0.46}`
	wild := `{"drone_id":"D2","seq":9223372036854775807,"ts":"2026-12-02T10:15:04Z","lat":51.47,"lon":-0.46,"alt_m":-1e300,"agl_m":1e300,"dropped":"speed_mps"}`
	future := `{"drone_id":"D3","seq":1,"ts":"2026-12-02T11:15:04Z","lat":51.47,"lon":-0.46}`
	for _, s := range []struct {
		route, ctype, enc uint8
		gz                bool
		body, ct, auth    string
	}{
		{0, 0, 0, false, good + "\n" + wild + "\n", "", ""},
		{0, 0, 0, false, good + "\n" + bad + "\n\n" + wild, "", ""},
		{0, 1, 0, false, "[" + good + "," + wild + "]", "", ""},
		{0, 1, 0, false, "[" + good + "," + bad + "]", "", ""},
		{0, 0, 1, true, good + "\n" + future, "", ""},
		{0, 0, 1, false, good, "", ""}, // says gzip, is not
		{0, 5, 0, false, good, "application/x-ndjson; charset=latin1", ""},
		{0, 0, 0, false, "\xef\xbb\xbf" + good + "\r\n" + strings.Repeat("x", 20000), "", "Bearer x"},
		{1, 1, 0, false, `{"flights":[{"id":"F1","current_state":{"timestamp":{"value":"2026-12-02T10:15:03Z","format":"RFC3339"},"position":{"lat":51.47,"lng":-0.46,"alt":-1e300}}}]}`, "", ""},
		{2, 1, 0, false, `[{"Location":{"Latitude":51.47,"Longitude":-0.46,"TimeStamp":300.5}}]`, "", ""},
		{3, 0, 0, false, good, "", ""},
		{0, 0, 4, false, good, "", ""},
		// The pilot's position: kept, dropped whole, dropped in part.
		{0, 0, 0, false, good[:len(good)-1] + `,"operator":{"lat":51.469,"lon":-0.452,"type":"live"}}` + "\n" +
			wild[:len(wild)-1] + `,"operator":{"lat":95,"lon":1}}` + "\n" + future[:len(future)-1] + `,"operator":{"lat":1,"lon":2,"type":7}}`, "", ""},
		{1, 1, 0, false, `{"flights":[{"id":"F2","details":{"operator_location":{"position":{"lat":51.469,"lng":-0.452},"altitude_type":"Dynamic"}},"current_state":{"timestamp":{"value":"2026-12-02T10:15:03Z","format":"RFC3339"},"position":{"lat":51.47,"lng":-0.46}}}]}`, "", ""},
	} {
		f.Add(s.route, s.ctype, s.enc, s.gz, []byte(s.body), s.ct, s.auth)
	}
	f.Fuzz(func(t *testing.T, route, ctype, enc uint8, gz bool, body []byte, ct, auth string) {
		fp := &fakeProducer{}
		s, err := NewServer(Options{Producer: fp, ProduceTimeout: time.Second, Logger: slogDiscard(),
			Limits: Limits{MaxBodyBytes: 64 << 10, MaxRecords: 50, MaxLineBytes: 4 << 10},
			Now:    func() time.Time { return fuzzNow }})
		if err != nil {
			t.Fatal(err)
		}
		path := fuzzRoutes[int(route)%len(fuzzRoutes)]
		typ := fuzzTypes[int(ctype)%len(fuzzTypes)]
		if typ == "" {
			typ = ct
		}
		coding := fuzzEncodings[int(enc)%len(fuzzEncodings)]
		sent := body
		if gz {
			var b bytes.Buffer
			zw := gzip.NewWriter(&b)
			_, _ = zw.Write(body)
			_ = zw.Close()
			sent = b.Bytes()
		}
		req := httptest.NewRequest(http.MethodPost, path, bytes.NewReader(sent))
		req.Host = "127.0.0.1:8080" // the listener's own address: past the Host check
		req.RemoteAddr = "127.0.0.1:40000"
		if typ != "" {
			req.Header.Set("Content-Type", typ)
		}
		if coding != "" {
			req.Header.Set("Content-Encoding", coding)
		}
		if auth != "" {
			req.Header.Set("Authorization", auth)
		}
		w := httptest.NewRecorder()
		s.ServeHTTP(w, req)
		// The body as the handler reads it, when it can: decompressed for
		// a gzip coding, as sent for none.
		var seen []byte
		modelled := true
		switch cc, _ := contentCoding(coding); cc {
		case "":
			seen = sent
		case "gzip":
			seen, modelled = body, gz
		default:
			modelled = false
		}

		if w.Code >= 500 {
			t.Fatalf("%s %s (%s, gzipped %v, %q): %d %s", path, typ, coding, gz, body, w.Code, w.Body.Bytes())
		}
		if path == "/metrics" {
			return
		}
		if ct := w.Header().Get("Content-Type"); !strings.HasPrefix(ct, "application/json") && w.Code != http.StatusNotFound && w.Code != http.StatusMethodNotAllowed {
			t.Fatalf("answer %d with Content-Type %q", w.Code, ct)
		}
		produced := fp.produced()
		switch w.Code {
		case http.StatusAccepted:
			var ok acceptedBody
			if err := json.Unmarshal(w.Body.Bytes(), &ok); err != nil {
				t.Fatalf("202 body %q: %v", w.Body.Bytes(), err)
			}
			if ok.Accepted != len(produced) || ok.Accepted == 0 {
				t.Fatalf("202 says %d accepted, %d produced", ok.Accepted, len(produced))
			}
			for i, r := range produced {
				p, err := telemetry.Decode(r.Value)
				if err != nil || string(r.Key) != p.DroneID {
					t.Fatalf("produced record %d %q (key %q) does not decode: %v", i, r.Value, r.Key, err)
				}
			}
			// The plain NDJSON and JSON routes: the records are the body's
			// lines, each as the independent decoder reads it.
			if path == "/v1/telemetry" && modelled {
				if want, ok := independent(seen, typ); ok {
					if len(want) != len(produced) {
						t.Fatalf("%d records produced, the body holds %d valid ones", len(produced), len(want))
					}
					for i := range want {
						if string(produced[i].Value) != string(want[i]) {
							t.Fatalf("record %d produced as\n%s\nthe body's line reads\n%s", i, produced[i].Value, want[i])
						}
					}
				}
			}
		case http.StatusBadRequest:
			if len(produced) != 0 {
				t.Fatalf("400, but %d records produced", len(produced))
			}
			var eb struct {
				Error  string      `json:"error"`
				Errors []LineError `json:"errors"`
			}
			if err := json.Unmarshal(w.Body.Bytes(), &eb); err != nil || eb.Error == "" {
				t.Fatalf("400 body %q: %v", w.Body.Bytes(), err)
			}
			if path == "/v1/telemetry" && strings.Contains(typ, "ndjson") && modelled {
				lines := ndjsonLines(seen)
				for _, le := range eb.Errors {
					if le.Line < 1 || le.Line > len(lines) {
						t.Fatalf("400 names line %d of %d", le.Line, len(lines))
					}
					if validLine(lines[le.Line-1]) {
						t.Fatalf("400 names line %d (%s: %s), which is valid: %q", le.Line, le.Field, le.Error, lines[le.Line-1])
					}
				}
			}
		default:
			if len(produced) != 0 {
				t.Fatalf("%d, but %d records produced", w.Code, len(produced))
			}
		}
	})
}

// ndjsonLines splits an NDJSON body into its lines as an editor numbers
// them.
func ndjsonLines(body []byte) [][]byte {
	return bytes.Split(telemetry.TrimBOM(body), []byte{'\n'})
}

// validLine: the line is a record the independent decoder keeps, within the
// handler's clock bounds (10 minutes ahead; no age bound) and line limit.
func validLine(l []byte) bool {
	l = bytes.TrimSpace(l)
	if len(l) == 0 || len(l) > 4<<10 {
		return false
	}
	p, err := telemetry.Decode(l)
	return err == nil && !p.TS.After(fuzzNow.Add(DefaultMaxClockSkewAhead))
}

// independent returns the canonical values the body's records should be
// produced as, read line by line (NDJSON) or element by element (a JSON
// array or object) with telemetry.DecodeWarn, and false when the body is of
// a shape this check does not model.
func independent(body []byte, typ string) ([][]byte, bool) {
	var raws [][]byte
	switch {
	case strings.Contains(typ, "ndjson"):
		for _, l := range ndjsonLines(body) {
			if l = bytes.TrimSpace(l); len(l) > 0 {
				raws = append(raws, l)
			}
		}
	default:
		b := bytes.TrimSpace(telemetry.TrimBOM(body))
		if len(b) > 0 && b[0] == '[' {
			var elems []json.RawMessage
			if json.Unmarshal(b, &elems) != nil {
				return nil, false
			}
			for _, e := range elems {
				raws = append(raws, e)
			}
		} else {
			raws = [][]byte{b}
		}
	}
	var out [][]byte
	for _, r := range raws {
		p, warns, err := telemetry.DecodeWarn(r, nil)
		if err != nil {
			return nil, false // a 202 with an invalid record fails the count check above
		}
		p.Dropped = telemetry.DroppedOf(warns)
		out = append(out, p.AppendJSON(nil))
	}
	return out, true
}
