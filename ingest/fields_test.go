package ingest

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/nofly-dev/nofly/telemetry"
)

const req = `"drone_id":"D","seq":%d,"ts":"2026-12-02T10:15:03Z","lat":51.47,"lon":-0.46`

func line(seq int, optional string) string {
	if optional == "" {
		return fmt.Sprintf(`{`+req+`}`, seq)
	}
	return fmt.Sprintf(`{`+req+`,%s}`, seq, optional)
}

// metricsText returns what /metrics serves.
func metricsText(t *testing.T, s *Server) string {
	t.Helper()
	w := httptest.NewRecorder()
	s.ServeHTTP(w, httptest.NewRequest(http.MethodGet, "http://127.0.0.1/metrics", nil))
	return w.Body.String()
}

// TestOptionalFieldsKeepThePosition: conventions are applied, a value
// outside all of them is dropped with a warning naming line and field, the
// record is produced without it, and the drop is counted. Before, each of
// these requests was a 400 and nothing was produced.
func TestOptionalFieldsKeepThePosition(t *testing.T) {
	lines := []string{
		line(1, `"heading_deg":360`),
		line(2, `"heading_deg":-90`),
		line(3, `"heading_deg":361,"speed_mps":255`),
		line(4, `"heading_deg":1000`),
		line(5, `"alt_m":30,"alt_ref":"XYZ"`),
		line(6, `"heading_deg":null,"alt_m":null`),
		line(7, `"speed_mps":-5,"alt_m":40`),
		line(8, `"alt_m":-1e300,"agl_m":1e300,"speed_mps":12`),
		line(9, `"dropped":"alt_m"`), // a feed's own "dropped" is not ingest's: replaced
	}
	// The canonical values, written out by hand.
	const head = `{"drone_id":"D","seq":%d,"ts":"2026-12-02T10:15:03Z","lat":51.47,"lon":-0.46`
	wantValues := []string{
		fmt.Sprintf(head+`,"heading_deg":0}`, 1),
		fmt.Sprintf(head+`,"heading_deg":270}`, 2),
		fmt.Sprintf(head+`}`, 3),
		fmt.Sprintf(head+`,"dropped":"heading_deg"}`, 4),
		fmt.Sprintf(head+`,"dropped":"alt_m,alt_ref"}`, 5), // no alt_m: its reference is unknown, so the height is
		fmt.Sprintf(head+`}`, 6),
		fmt.Sprintf(head+`,"alt_m":40,"dropped":"speed_mps"}`, 7),
		fmt.Sprintf(head+`,"speed_mps":12,"dropped":"alt_m,agl_m"}`, 8), // the height is unknown, which alarms
		fmt.Sprintf(head+`}`, 9),
	}
	wantWarnings := func(lineOf func(int) int) []LineWarning {
		return []LineWarning{
			{Line: lineOf(4), Field: "heading_deg", Warning: "1000 is outside [-360, 360] (361: unknown); dropped"},
			{Line: lineOf(5), Field: "alt_ref", Warning: `"XYZ" is not AMSL, WGS84 or AGL; dropped`},
			{Line: lineOf(5), Field: "alt_m", Warning: "dropped with alt_ref, which is unknown: the height counts as unknown"},
			{Line: lineOf(7), Field: "speed_mps", Warning: "-5 is negative; dropped"},
			{Line: lineOf(8), Field: "alt_m", Warning: "-1e+300 is outside the physical range -1000..30000 m AMSL; dropped: the height counts as unknown"},
			{Line: lineOf(8), Field: "agl_m", Warning: "1e+300 is outside the physical range -100..30000 m; dropped: the height counts as unknown"},
		}
	}
	tests := []struct {
		name, contentType, body string
		lineOf                  func(seq int) int
	}{
		{"ndjson", ndjson, "\n" + strings.Join(lines, "\n"), func(seq int) int { return seq + 1 }}, // a blank first line
		{"json array", "application/json", "[" + strings.Join(lines, ",") + "]", func(seq int) int { return seq }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			fp := &fakeProducer{}
			s := newTestServer(t, fp, Limits{})
			res := post(t, s, tc.contentType, tc.body)
			if res.code != http.StatusAccepted {
				t.Fatalf("status %d (%+v): a position was lost over an optional field", res.code, res.errBody)
			}
			got := fp.produced()
			if res.accepted != len(lines) || len(got) != len(lines) {
				t.Fatalf("accepted %d, produced %d, want %d", res.accepted, len(got), len(lines))
			}
			for i, r := range got {
				if string(r.Value) != wantValues[i] {
					t.Errorf("record %d\n got %s\nwant %s", i+1, r.Value, wantValues[i])
				}
			}
			want := wantWarnings(tc.lineOf)
			if fmt.Sprint(res.okBody.Warnings) != fmt.Sprint(want) || res.okBody.WarningsTotal != len(want) {
				t.Errorf("warnings (total %d)\n got %+v\nwant %+v", res.okBody.WarningsTotal, res.okBody.Warnings, want)
			}
			m := metricsText(t, s)
			for _, w := range []string{
				`nofly_ingest_fields_dropped_total{field="heading_deg"} 1`,
				`nofly_ingest_fields_dropped_total{field="alt_ref"} 1`,
				`nofly_ingest_fields_dropped_total{field="alt_m"} 2`,
				`nofly_ingest_fields_dropped_total{field="speed_mps"} 1`,
				`nofly_ingest_fields_dropped_total{field="agl_m"} 1`,
				`nofly_ingest_fields_dropped_total{field="v_accuracy_m"} 0`,
			} {
				if !strings.Contains(m, w) {
					t.Errorf("metrics lack %q", w)
				}
			}
		})
	}
}

// TestOperatorThroughIngest: the pilot's position goes into the Kafka
// value as sent (canonical), and reads back from it as the alerter reads
// it; a bad one is dropped with a warning naming its member, the drone's
// position produced all the same, and an old record without one is
// unchanged.
func TestOperatorThroughIngest(t *testing.T) {
	lines := []string{
		line(1, `"operator":{"type":"live","alt_m":95.50,"lat":51.4690,"lon":-0.452,"note":"x"}`),
		line(2, `"operator":{"lat":51.469,"lon":-0.452}`),
		line(3, `"operator":{"lat":0,"lon":0,"type":"takeoff"}`), // ODID's unknown
		line(4, `"operator":{"lat":95,"lon":-0.452}`),
		line(5, `"operator":{"lat":51.469,"lon":-0.452,"type":"dynamic"}`),
		line(6, `"operator":"here"`),
		line(7, `"operator":null,"alt_m":80`),
		line(8, ``),
	}
	const head = `{"drone_id":"D","seq":%d,"ts":"2026-12-02T10:15:03Z","lat":51.47,"lon":-0.46`
	wantValues := []string{
		fmt.Sprintf(head+`,"operator":{"lat":51.469,"lon":-0.452,"alt_m":95.5,"type":"live"}}`, 1),
		fmt.Sprintf(head+`,"operator":{"lat":51.469,"lon":-0.452}}`, 2),
		fmt.Sprintf(head+`}`, 3),
		fmt.Sprintf(head+`,"dropped":"operator"}`, 4),
		fmt.Sprintf(head+`,"operator":{"lat":51.469,"lon":-0.452}}`, 5), // the type alone is dropped: the position is still known
		fmt.Sprintf(head+`,"dropped":"operator"}`, 6),
		fmt.Sprintf(head+`,"alt_m":80}`, 7),
		fmt.Sprintf(head+`}`, 8),
	}
	wantWarnings := []LineWarning{
		{Line: 4, Field: "operator.lat", Warning: "95 is outside -90..90; the operator was dropped"},
		{Line: 5, Field: "operator.type", Warning: `"dynamic" is not takeoff, live or fixed; dropped`},
		{Line: 6, Field: "operator", Warning: "must be a JSON object, got a JSON string; dropped"},
	}
	fp := &fakeProducer{}
	s := newTestServer(t, fp, Limits{})
	res := post(t, s, ndjson, strings.Join(lines, "\n"))
	if res.code != http.StatusAccepted {
		t.Fatalf("status %d (%+v): a position was lost over its pilot's", res.code, res.errBody)
	}
	got := fp.produced()
	if len(got) != len(lines) {
		t.Fatalf("produced %d, want %d", len(got), len(lines))
	}
	for i, r := range got {
		if string(r.Value) != wantValues[i] {
			t.Errorf("record %d\n got %s\nwant %s", i+1, r.Value, wantValues[i])
		}
		// The alerter's read of the Kafka value gives the same record back.
		p, err := telemetry.Decode(r.Value)
		if err != nil {
			t.Fatalf("record %d: the alerter cannot read %s: %v", i+1, r.Value, err)
		}
		if again := p.AppendJSON(nil); string(again) != string(r.Value) {
			t.Errorf("record %d: read back as %s", i+1, again)
		}
	}
	p, _ := telemetry.Decode(got[0].Value)
	if o := p.Operator; o == nil || o.Lat != 51.469 || o.Lon != -0.452 || o.AltM == nil || *o.AltM != 95.5 || o.Type != telemetry.OperatorLive {
		t.Errorf("operator read back %+v", o)
	}
	if fmt.Sprint(res.okBody.Warnings) != fmt.Sprint(wantWarnings) {
		t.Errorf("warnings\n got %+v\nwant %+v", res.okBody.Warnings, wantWarnings)
	}
	m := metricsText(t, s)
	for _, w := range []string{
		`nofly_ingest_fields_dropped_total{field="operator.lat"} 1`,
		`nofly_ingest_fields_dropped_total{field="operator.type"} 1`,
		`nofly_ingest_fields_dropped_total{field="operator"} 1`,
		`nofly_ingest_fields_dropped_total{field="operator.alt_m"} 0`,
	} {
		if !strings.Contains(m, w) {
			t.Errorf("metrics lack %q", w)
		}
	}
}

// TestWarningsAnswer: a request without a dropped field is answered as
// before, the list is capped as errors are, and a rejected request counts
// no drop.
func TestWarningsAnswer(t *testing.T) {
	t.Run("none", func(t *testing.T) {
		s := newTestServer(t, &fakeProducer{}, Limits{})
		if res := post(t, s, ndjson, line(1, `"heading_deg":90`)); res.code != 202 || string(res.raw) != `{"accepted":1}`+"\n" {
			t.Fatalf("%d %s", res.code, res.raw)
		}
	})
	t.Run("capped", func(t *testing.T) {
		const n = maxListedErrors + 50
		var b strings.Builder
		for i := range n {
			b.WriteString(line(i, `"heading_deg":999`) + "\n")
		}
		s := newTestServer(t, &fakeProducer{}, Limits{})
		res := post(t, s, ndjson, b.String())
		if res.code != 202 || res.accepted != n || len(res.okBody.Warnings) != maxListedErrors || res.okBody.WarningsTotal != n {
			t.Fatalf("%d: accepted %d, %d warnings listed of %d", res.code, res.accepted, len(res.okBody.Warnings), res.okBody.WarningsTotal)
		}
		if m := metricsText(t, s); !strings.Contains(m, fmt.Sprintf(`nofly_ingest_fields_dropped_total{field="heading_deg"} %d`, n)) {
			t.Errorf("drops not counted:\n%s", m)
		}
	})
	t.Run("rejected request", func(t *testing.T) {
		s := newTestServer(t, &fakeProducer{}, Limits{})
		res := post(t, s, ndjson, line(1, `"heading_deg":999`)+"\n"+`{"drone_id":"D","seq":2}`)
		if res.code != 400 || len(res.errBody.Errors) != 1 || res.errBody.Errors[0].Line != 2 {
			t.Fatalf("%d %+v", res.code, res.errBody)
		}
		if m := metricsText(t, s); !strings.Contains(m, `nofly_ingest_fields_dropped_total{field="heading_deg"} 0`) {
			t.Errorf("a drop counted for a request that produced nothing")
		}
	})
}

// TestBOM: a UTF-8 byte order mark at the start of a body is skipped (it
// was a 400 "invalid character 'ï'"); one inside a record is still an error.
func TestBOM(t *testing.T) {
	const bom = "\uFEFF"
	tests := []struct {
		name, contentType, body string
		wantCode                int
	}{
		{"ndjson", ndjson, bom + rec("A", 1) + "\n" + rec("A", 2), 202},
		{"json object", "application/json", bom + rec("A", 1), 202},
		{"json array", "application/json", bom + " [" + rec("A", 1) + "]", 202},
		{"second line", ndjson, rec("A", 1) + "\n" + bom + rec("A", 2), 400},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			fp := &fakeProducer{}
			res := post(t, newTestServer(t, fp, Limits{}), tc.contentType, tc.body)
			if res.code != tc.wantCode {
				t.Fatalf("status %d (%+v), want %d", res.code, res.errBody, tc.wantCode)
			}
		})
	}
}

// TestClockBounds: ts against the receive time, just inside and just
// outside each bound, with an injected clock. Beyond a bound is a 400
// naming ts and the skew (before: a ts more than 1h ahead went to Kafka as
// the record time and the broker's refusal was a 500).
func TestClockBounds(t *testing.T) {
	now := time.Date(2026, 12, 2, 10, 15, 0, 0, time.UTC) // rec's ts is 3.25s later
	at := func(d time.Duration) string {
		return fmt.Sprintf(`{"drone_id":"D","seq":1,"ts":%q,"lat":1,"lon":2}`, now.Add(d).Format(time.RFC3339Nano))
	}
	const ms = time.Millisecond
	tests := []struct {
		name        string
		ahead, age  time.Duration
		body        string
		wantCode    int
		wantInError string
	}{
		{"default ahead, just inside", 0, 0, at(DefaultMaxClockSkewAhead), 202, ""},
		{"default ahead, just outside", 0, 0, at(DefaultMaxClockSkewAhead + ms), 400, "10m0.001s ahead of the receive time 2026-12-02T10:15:00Z, more than the allowed clock skew of 10m0s"},
		{"ahead 1m, just inside", time.Minute, 0, at(time.Minute), 202, ""},
		{"ahead 1m, just outside", time.Minute, 0, at(time.Minute + ms), 400, "1m0.001s ahead"},
		{"2099 with the bound", 0, 0, `{"drone_id":"D","seq":1,"ts":"2099-01-01T00:00:00Z","lat":1,"lon":2}`, 400, "2099-01-01T00:00:00Z is "},
		{"2099 without a bound", -1, 0, `{"drone_id":"D","seq":1,"ts":"2099-01-01T00:00:00Z","lat":1,"lon":2}`, 202, ""},
		{"no age bound by default", 0, 0, at(-10 * 365 * 24 * time.Hour), 202, ""},
		{"age 1h, just inside", 0, time.Hour, at(-time.Hour), 202, ""},
		{"age 1h, just outside", 0, time.Hour, at(-time.Hour - ms), 400, "1h0m0.001s before the receive time 2026-12-02T10:15:00Z, older than the allowed record age of 1h0m0s"},
		{"age 1h, year 1 (beyond a Duration)", 0, time.Hour, `{"drone_id":"D","seq":1,"ts":"0001-01-01T00:00:00Z","lat":1,"lon":2}`, 400, "older than the allowed record age of 1h0m0s"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			fp := &fakeProducer{}
			s, err := NewServer(Options{Producer: fp, Logger: slogDiscard(), Now: func() time.Time { return now },
				MaxClockSkewAhead: tc.ahead, MaxRecordAge: tc.age})
			if err != nil {
				t.Fatal(err)
			}
			res := post(t, s, ndjson, rec("A", 1)+"\n"+tc.body)
			if res.code != tc.wantCode {
				t.Fatalf("status %d (%+v), want %d", res.code, res.errBody, tc.wantCode)
			}
			if tc.wantCode == 202 {
				for _, r := range fp.produced() {
					if !r.Time.Equal(now) {
						t.Errorf("record time %v, want the receive time %v", r.Time, now)
					}
				}
				return
			}
			if len(fp.produced()) != 0 {
				t.Error("a rejected request produced records")
			}
			errs := res.errBody.Errors
			if len(errs) != 1 || errs[0].Line != 2 || errs[0].Field != "ts" || !strings.Contains(errs[0].Error, tc.wantInError) {
				t.Fatalf("errors %+v, want one on line 2, field ts, containing %q", errs, tc.wantInError)
			}
			if m := metricsText(t, s); !strings.Contains(m, `nofly_ingest_records_rejected_total{reason="ts_out_of_range"} 2`) {
				t.Errorf("not counted as ts_out_of_range")
			}
		})
	}
}

func TestClockOptionsChecked(t *testing.T) {
	if _, err := NewServer(Options{Producer: &fakeProducer{}, MaxRecordAge: -time.Second}); err == nil {
		t.Fatal("a negative MaxRecordAge was accepted")
	}
}
