package ingest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/nofly-dev/nofly/producer"
	"github.com/nofly-dev/nofly/telemetry"
)

// fakeProducer records what it is asked to produce and answers err. When
// hold is set, Produce waits for it to be closed (or ctx to end).
type fakeProducer struct {
	mu      sync.Mutex
	calls   [][]producer.Record
	err     error
	hold    chan struct{}
	entered chan struct{}
}

func (f *fakeProducer) Produce(ctx context.Context, recs []producer.Record) error {
	if f.entered != nil {
		f.entered <- struct{}{}
	}
	if f.hold != nil {
		select {
		case <-f.hold:
		case <-ctx.Done():
			return &producer.ProduceError{Records: []producer.RecordError{{Index: 0, Err: ctx.Err()}}}
		}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	cp := make([]producer.Record, len(recs))
	for i, r := range recs {
		cp[i] = r
		cp[i].Key = append([]byte(nil), r.Key...)
		cp[i].Value = append([]byte(nil), r.Value...)
	}
	f.calls = append(f.calls, cp)
	return f.err
}

func (f *fakeProducer) produced() []producer.Record {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []producer.Record
	for _, c := range f.calls {
		out = append(out, c...)
	}
	return out
}

func rec(drone string, seq int) string {
	return fmt.Sprintf(`{"drone_id":%q,"seq":%d,"ts":"2026-12-02T10:15:03.250Z","lat":51.4706,"lon":-0.4619,"alt_m":85,"speed_mps":12.5,"heading_deg":270}`, drone, seq)
}

func newTestServer(t *testing.T, p Producer, lim Limits) *Server {
	t.Helper()
	s, err := NewServer(Options{Producer: p, Limits: lim, ProduceTimeout: time.Second, RetryAfter: 2 * time.Second,
		Logger: slogDiscard()})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

type response struct {
	code       int
	retryAfter string
	accepted   int
	okBody     acceptedBody
	raw        []byte
	errBody    errorBody
}

func post(t *testing.T, h http.Handler, contentType, body string) response {
	t.Helper()
	req := httptest.NewRequest(http.MethodPost, "http://127.0.0.1/v1/telemetry", strings.NewReader(body))
	req.RemoteAddr = "127.0.0.1:40000" // without feed keys only loopback may write (auth.go)
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, req)
	res := response{code: w.Code, retryAfter: w.Header().Get("Retry-After")}
	if ct := w.Header().Get("Content-Type"); ct != "application/json" {
		t.Fatalf("answer Content-Type %q, want application/json", ct)
	}
	raw := w.Body.Bytes()
	res.raw = raw
	if w.Code == http.StatusAccepted {
		if err := json.Unmarshal(raw, &res.okBody); err != nil {
			t.Fatalf("202 body %q: %v", raw, err)
		}
		res.accepted = res.okBody.Accepted
	} else if err := json.Unmarshal(raw, &res.errBody); err != nil {
		t.Fatalf("%d body %q: %v", w.Code, raw, err)
	}
	return res
}

const ndjson = "application/x-ndjson"

func TestPostTelemetry(t *testing.T) {
	long := `{"drone_id":"A","seq":1,"ts":"2026-12-02T10:15:03Z","lat":1,"lon":2,"pad":"` + strings.Repeat("x", 300) + `"}`
	tests := []struct {
		name        string
		contentType string
		body        string
		lim         Limits
		wantCode    int
		wantRecords int         // produced (and accepted) on 202
		wantErrors  []LineError // for 400: the listed errors, exactly
	}{
		{name: "ndjson one", contentType: ndjson, body: rec("UAV-1", 1) + "\n", wantCode: 202, wantRecords: 1},
		{name: "ndjson blank lines and CRLF", contentType: ndjson,
			body: "\n" + rec("UAV-1", 1) + "\r\n   \n" + rec("UAV-2", 1), wantCode: 202, wantRecords: 2},
		{name: "ndjson alias and charset", contentType: "application/ndjson; charset=utf-8",
			body: rec("UAV-1", 1), wantCode: 202, wantRecords: 1},
		{name: "json object", contentType: "application/json", body: rec("UAV-1", 7), wantCode: 202, wantRecords: 1},
		{name: "json array", contentType: "application/json",
			body: "[" + rec("UAV-1", 1) + ",\n" + rec("UAV-1", 2) + "," + rec("UAV-2", 1) + "]", wantCode: 202, wantRecords: 3},
		{name: "unknown fields ignored", contentType: ndjson,
			body:     `{"drone_id":"X","seq":1,"ts":"2026-12-02T10:15:03Z","lat":1,"lon":2,"battery":0.5,"extra":{"a":[1]}}`,
			wantCode: 202, wantRecords: 1},

		{name: "ndjson bad lat names line and field", contentType: ndjson,
			body:     rec("UAV-1", 1) + "\n\n" + strings.Replace(rec("UAV-1", 2), "51.4706", "91", 1) + "\n",
			wantCode: 400, wantErrors: []LineError{{Line: 3, Field: "lat", Error: "must be between -90 and 90"}}},
		{name: "ndjson every bad line listed", contentType: ndjson,
			body:     `{"seq":1}` + "\n" + rec("UAV-1", 1) + "\n" + `not json` + "\n" + strings.Replace(rec("B", 1), `"seq":1`, `"seq":"x"`, 1),
			wantCode: 400, wantErrors: []LineError{
				{Line: 1, Field: "drone_id", Error: "required"},
				{Line: 3, Field: "", Error: "malformed JSON at byte 2: invalid character 'o' in literal null (expecting 'u')"},
				{Line: 4, Field: "seq", Error: "must be an integer, got JSON string"},
			}},
		{name: "json array bad element is line index+1", contentType: "application/json",
			body:     "[" + rec("UAV-1", 1) + "," + strings.Replace(rec("UAV-1", 2), `"lon":-0.4619`, `"lon":-181`, 1) + "]",
			wantCode: 400, wantErrors: []LineError{{Line: 2, Field: "lon", Error: "must be between -180 and 180"}}},
		{name: "json object bad", contentType: "application/json", body: `{"drone_id":"bad id!","seq":1}`,
			wantCode: 400, wantErrors: []LineError{{Line: 1, Field: "drone_id", Error: "must be 1-64 characters of [A-Za-z0-9._:-]"}}},
		{name: "json array truncated", contentType: "application/json", body: "[" + rec("A", 1) + ",",
			wantCode: 400, wantErrors: []LineError{{Line: 2, Field: "", Error: "malformed JSON: EOF"}}},
		{name: "json trailing data", contentType: "application/json", body: "[" + rec("A", 1) + "] x",
			wantCode: 400, wantErrors: []LineError{{Line: 2, Field: "", Error: "malformed JSON: data after the closing ]"}}},
		{name: "empty body", contentType: ndjson, body: "\n \n", wantCode: 400},
		{name: "empty json array", contentType: "application/json", body: "[]", wantCode: 400},

		{name: "no content type", contentType: "", body: rec("A", 1), wantCode: 415},
		{name: "text/plain", contentType: "text/plain", body: rec("A", 1), wantCode: 415},
		{name: "latin1", contentType: "application/json; charset=iso-8859-1", body: rec("A", 1), wantCode: 415},

		{name: "body too large", contentType: ndjson, lim: Limits{MaxBodyBytes: 100},
			body: rec("A", 1) + "\n" + rec("A", 2), wantCode: 413},
		{name: "too many records ndjson", contentType: ndjson, lim: Limits{MaxRecords: 2},
			body: rec("A", 1) + "\n" + rec("A", 2) + "\n" + rec("A", 3), wantCode: 413},
		{name: "too many records json", contentType: "application/json", lim: Limits{MaxRecords: 1},
			body: "[" + rec("A", 1) + "," + rec("A", 2) + "]", wantCode: 413},
		{name: "records at the limit", contentType: ndjson, lim: Limits{MaxRecords: 2},
			body: rec("A", 1) + "\n" + rec("A", 2) + "\n", wantCode: 202, wantRecords: 2},
		{name: "line too long", contentType: ndjson, lim: Limits{MaxLineBytes: 300},
			body:     rec("A", 1) + "\n" + long + "\n",
			wantCode: 400, wantErrors: []LineError{{Line: 2, Error: fmt.Sprintf("record is %d bytes, longer than the limit of 300", len(long))}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fp := &fakeProducer{}
			s := newTestServer(t, fp, tt.lim)
			res := post(t, s, tt.contentType, tt.body)
			if res.code != tt.wantCode {
				t.Fatalf("status %d, want %d (body %+v)", res.code, tt.wantCode, res.errBody)
			}
			got := fp.produced()
			if tt.wantCode != 202 {
				if len(got) != 0 {
					t.Errorf("a rejected request produced %d records", len(got))
				}
				if res.errBody.Error == "" {
					t.Errorf("no error message in the %d answer", res.code)
				}
				if tt.wantErrors != nil && !equalErrors(res.errBody.Errors, tt.wantErrors) {
					t.Errorf("errors\n got %+v\nwant %+v", res.errBody.Errors, tt.wantErrors)
				}
				return
			}
			if res.accepted != tt.wantRecords || len(got) != tt.wantRecords {
				t.Fatalf("accepted %d, produced %d, want %d", res.accepted, len(got), tt.wantRecords)
			}
		})
	}
}

func equalErrors(a, b []LineError) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// TestRecordsAsProduced checks key, value, time (the receive time, not ts)
// and partition of what the handler hands the producer, in request order.
func TestRecordsAsProduced(t *testing.T) {
	fp := &fakeProducer{}
	received := time.Date(2026, 12, 2, 10, 20, 0, 0, time.UTC)
	s, err := NewServer(Options{Producer: fp, Logger: slogDiscard(), Now: func() time.Time { return received }})
	if err != nil {
		t.Fatal(err)
	}
	body := `{"drone_id":"UAV-0042","seq":1187,"ts":"2026-12-02T11:15:03.250+01:00","lat":51.4706,"lon":-0.4619,"alt_m":85.0,"unknown":1}` + "\n" + rec("UAV-7", 3)
	if res := post(t, s, ndjson, body); res.code != 202 {
		t.Fatalf("status %d: %+v", res.code, res.errBody)
	}
	got := fp.produced()
	if len(got) != 2 {
		t.Fatalf("produced %d records", len(got))
	}
	for i, line := range strings.Split(body, "\n") {
		p, err := telemetry.Decode([]byte(line))
		if err != nil {
			t.Fatal(err)
		}
		r := got[i]
		if string(r.Key) != p.DroneID {
			t.Errorf("record %d key %q, want %q", i, r.Key, p.DroneID)
		}
		if want := string(p.AppendJSON(nil)); string(r.Value) != want {
			t.Errorf("record %d value\n got %s\nwant %s", i, r.Value, want)
		}
		if !r.Time.Equal(received) {
			t.Errorf("record %d time %v, want the receive time %v (ts is %v)", i, r.Time, received, p.TS)
		}
		if r.Partition != producer.AnyPartition {
			t.Errorf("record %d partition %d, want AnyPartition", i, r.Partition)
		}
	}
	if want := `{"drone_id":"UAV-0042","seq":1187,"ts":"2026-12-02T10:15:03.25Z","lat":51.4706,"lon":-0.4619,"alt_m":85}`; string(got[0].Value) != want {
		t.Errorf("canonical value %s, want %s", got[0].Value, want)
	}
}

func TestProduceErrors(t *testing.T) {
	unavailable := &producer.ProduceError{Records: []producer.RecordError{{Index: 0, Err: producer.ErrBrokerUnavailable}}}
	tests := []struct {
		name           string
		err            error
		wantCode       int
		wantRetryAfter string
	}{
		{"broker unavailable", unavailable, 503, "2"},
		{"sequence lost", &producer.ProduceError{Records: []producer.RecordError{{Index: 1, Err: producer.ErrSequence}}}, 503, "2"},
		{"aborted", &producer.ProduceError{Records: []producer.RecordError{{Index: 1, Err: producer.ErrAborted}}}, 503, "2"},
		{"deadline", &producer.ProduceError{Records: []producer.RecordError{{Index: 0, Err: context.DeadlineExceeded}}}, 503, "2"},
		{"closed (shutdown)", &producer.ProduceError{Records: []producer.RecordError{{Index: 0, Err: producer.ErrClosed}}}, 503, "2"},
		{"rejected by broker", &producer.ProduceError{Records: []producer.RecordError{{Index: 0, Err: producer.ErrRejected}}}, 500, ""},
		{"invalid record", &producer.ProduceError{Records: []producer.RecordError{{Index: 1, Err: fmt.Errorf("%w: too big", producer.ErrInvalidRecord)}}}, 400, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fp := &fakeProducer{err: tt.err}
			s := newTestServer(t, fp, Limits{})
			res := post(t, s, ndjson, rec("A", 1)+"\n"+rec("A", 2))
			if res.code != tt.wantCode {
				t.Fatalf("status %d, want %d", res.code, tt.wantCode)
			}
			if res.retryAfter != tt.wantRetryAfter {
				t.Errorf("Retry-After %q, want %q", res.retryAfter, tt.wantRetryAfter)
			}
			if tt.wantCode == 400 && (len(res.errBody.Errors) != 1 || res.errBody.Errors[0].Line != 2) {
				t.Errorf("400 errors %+v, want one naming line 2", res.errBody.Errors)
			}
			w := httptest.NewRecorder()
			s.ServeHTTP(w, httptest.NewRequest(http.MethodGet, "http://127.0.0.1/metrics", nil))
			if !strings.Contains(w.Body.String(), "nofly_ingest_records_accepted_total 0") {
				t.Errorf("accepted counter moved after a failure:\n%s", w.Body.String())
			}
		})
	}
}

// TestTimeoutIs503 holds Produce past ProduceTimeout: the answer is 503.
func TestTimeoutIs503(t *testing.T) {
	fp := &fakeProducer{hold: make(chan struct{})}
	defer close(fp.hold)
	s := newTestServer(t, fp, Limits{})
	res := post(t, s, ndjson, rec("A", 1))
	if res.code != 503 || res.retryAfter != "2" {
		t.Fatalf("status %d Retry-After %q, want 503 and 2", res.code, res.retryAfter)
	}
}

// Test202AfterProduce: nothing is written to the client while Produce has
// not returned, and the 202 comes once it has.
func Test202AfterProduce(t *testing.T) {
	fp := &fakeProducer{hold: make(chan struct{}), entered: make(chan struct{}, 1)}
	s, err := NewServer(Options{Producer: fp, ProduceTimeout: time.Minute, Logger: slogDiscard()})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(s)
	defer srv.Close()
	type result struct {
		code int
		err  error
		at   time.Time
	}
	done := make(chan result, 1)
	go func() {
		res, err := http.Post(srv.URL+"/v1/telemetry", ndjson, strings.NewReader(rec("A", 1)))
		if err != nil {
			done <- result{err: err}
			return
		}
		_, _ = io.Copy(io.Discard, res.Body)
		res.Body.Close()
		done <- result{code: res.StatusCode, at: time.Now()}
	}()
	<-fp.entered // Produce is running
	select {
	case r := <-done:
		t.Fatalf("answered (%d, %v) while Produce had not returned", r.code, r.err)
	default:
	}
	released := time.Now()
	close(fp.hold)
	r := <-done
	if r.err != nil || r.code != 202 {
		t.Fatalf("got %d %v, want 202", r.code, r.err)
	}
	if r.at.Before(released) {
		t.Fatal("202 arrived before Produce was released")
	}
}

func TestHealthReadyMetrics(t *testing.T) {
	var readyErr error
	reg := prometheus.NewRegistry()
	stats := producer.Stats{Records: 10, Retries: 3, Duplicates: 2}
	reg.MustRegister(NewStatsCollector(func() producer.Stats { return stats }))
	s, err := NewServer(Options{Producer: &fakeProducer{}, Registry: reg, Logger: slogDiscard(),
		Ready: func(context.Context) error { return readyErr }})
	if err != nil {
		t.Fatal(err)
	}
	get := func(path string) (int, string) {
		w := httptest.NewRecorder()
		s.ServeHTTP(w, httptest.NewRequest(http.MethodGet, "http://127.0.0.1"+path, nil))
		return w.Code, w.Body.String()
	}
	post(t, s, ndjson, rec("A", 1))
	post(t, s, ndjson, "{}")
	tests := []struct {
		name     string
		setup    func()
		path     string
		wantCode int
		wantBody []string
	}{
		{"healthz", nil, "/healthz", 200, []string{`"ok"`}},
		{"ready", nil, "/readyz", 200, []string{`"ready"`}},
		{"not ready", func() { readyErr = errors.New("no metadata") }, "/readyz", 503, []string{"Kafka is not ready"}}, // the detail is logged (TestHostileIngestInternalErrorsHidden)
		{"metrics", nil, "/metrics", 200, []string{
			"nofly_ingest_records_accepted_total 1",
			`nofly_ingest_records_rejected_total{reason="invalid"} 1`,
			`nofly_ingest_http_requests_total{code="202",route="/v1/telemetry"} 1`,
			`nofly_ingest_http_requests_total{code="400",route="/v1/telemetry"} 1`,
			`nofly_ingest_produce_duration_seconds_count{result="ok"} 1`,
			"nofly_producer_retries_total 3",
			"nofly_producer_duplicates_total 2",
		}},
		{"draining", func() { readyErr = nil; s.Drain() }, "/readyz", 503, []string{"draining"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.setup != nil {
				tt.setup()
			}
			code, body := get(tt.path)
			if code != tt.wantCode {
				t.Fatalf("%s: %d, want %d: %s", tt.path, code, tt.wantCode, body)
			}
			for _, want := range tt.wantBody {
				if !strings.Contains(body, want) {
					t.Errorf("%s lacks %q:\n%s", tt.path, want, body)
				}
			}
		})
	}
}

// TestClientGone: a client that leaves while Produce waits is counted as
// 499 / client_closed, not as a Kafka 503.
func TestClientGone(t *testing.T) {
	fp := &fakeProducer{hold: make(chan struct{}), entered: make(chan struct{}, 1)}
	defer close(fp.hold)
	s := newTestServer(t, fp, Limits{})
	ctx, cancel := context.WithCancel(context.Background())
	req := httptest.NewRequestWithContext(ctx, http.MethodPost, "http://127.0.0.1/v1/telemetry", strings.NewReader(rec("A", 1)))
	req.RemoteAddr = "127.0.0.1:40000"
	req.Header.Set("Content-Type", ndjson)
	w := httptest.NewRecorder()
	done := make(chan struct{})
	go func() { s.ServeHTTP(w, req); close(done) }()
	<-fp.entered
	cancel()
	<-done
	if w.Code != StatusClientClosedRequest {
		t.Fatalf("status %d, want 499", w.Code)
	}
	m := httptest.NewRecorder()
	s.ServeHTTP(m, httptest.NewRequest(http.MethodGet, "http://127.0.0.1/metrics", nil))
	for _, want := range []string{`nofly_ingest_records_rejected_total{reason="client_closed"} 1`,
		`nofly_ingest_records_rejected_total{reason="kafka_unavailable"} 0`,
		`nofly_ingest_http_requests_total{code="499",route="/v1/telemetry"} 1`} {
		if !strings.Contains(m.Body.String(), want) {
			t.Errorf("metrics lack %q", want)
		}
	}
}
