package ingestd

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/legacy"
	"github.com/go-chi/chi/v5"
	"github.com/segmentio/kafka-go"

	"github.com/nofly-dev/nofly/ingest/feedkey"
	"github.com/nofly-dev/nofly/internal/testenv"
)

// loadSpec parses openapi.yaml with a real OpenAPI 3 parser and validates
// it (schemas, references, examples against their schemas).
func loadSpec(t *testing.T) *openapi3.T {
	t.Helper()
	loader := openapi3.NewLoader()
	doc, err := loader.LoadFromData(openapiYAML)
	if err != nil {
		t.Fatalf("openapi.yaml does not parse: %v", err)
	}
	if err := doc.Validate(loader.Context); err != nil {
		t.Fatalf("openapi.yaml is not valid OpenAPI 3: %v", err)
	}
	return doc
}

// TestOpenAPIRoutes: every route the intake serves is an operation of
// openapi.yaml, and the description names no operation the intake lacks.
func TestOpenAPIRoutes(t *testing.T) {
	doc := loadSpec(t)
	cfg := DefaultConfig()
	cfg.Addr = "127.0.0.1:0"
	svc, err := newService(cfg, testLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	defer svc.ln.Close()
	served := map[string]bool{}
	err = chi.Walk(svc.api.Router(), func(method, route string, _ http.Handler, _ ...func(http.Handler) http.Handler) error {
		served[method+" "+route] = true
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	described := map[string]bool{}
	for path, item := range doc.Paths.Map() {
		for method := range item.Operations() {
			described[method+" "+path] = true
		}
	}
	for r := range served {
		if !described[r] {
			t.Errorf("the intake serves %q, which openapi.yaml does not describe", r)
		}
	}
	for r := range described {
		if !served[r] {
			t.Errorf("openapi.yaml describes %q, which the intake does not serve", r)
		}
	}
	if len(served) < 5 {
		t.Errorf("the intake serves only %v", served)
	}
}

// decodeNDJSONBody is the body decoder of the NDJSON media types for request
// validation: the description gives an NDJSON body the schema of the array
// of its lines' values, blank lines skipped.
func decodeNDJSONBody(body io.Reader, _ http.Header, _ *openapi3.SchemaRef, _ openapi3filter.EncodingFn) (any, error) {
	out := []any{}
	sc := bufio.NewScanner(body)
	sc.Buffer(nil, 1<<20)
	for n := 1; sc.Scan(); n++ {
		line := bytes.TrimSpace(sc.Bytes())
		if len(line) == 0 {
			continue
		}
		// UseNumber: a number beyond float64 is still a JSON number.
		dec := json.NewDecoder(bytes.NewReader(line))
		dec.UseNumber()
		var v any
		if err := dec.Decode(&v); err != nil {
			return nil, fmt.Errorf("line %d: %w", n, err)
		}
		out = append(out, v)
	}
	return out, sc.Err()
}

// TestOpenAPIContract sends the intake (against the real Kafka, and against
// a broker that is not there) representative requests and checks each real
// answer against openapi.yaml: its status is documented for the operation
// and its headers and body match the schema. Where the request body is
// judged, the description's verdict on it agrees with the server's: what
// the schema allows is accepted, what it refuses is refused.
func TestOpenAPIContract(t *testing.T) {
	openapi3filter.RegisterBodyDecoder("application/x-ndjson", decodeNDJSONBody)
	openapi3filter.RegisterBodyDecoder("application/ndjson", decodeNDJSONBody)
	doc := loadSpec(t)
	router, err := legacy.NewRouter(doc)
	if err != nil {
		t.Fatal(err)
	}

	brokers := testenv.Kafka(t)
	cfg := DefaultConfig()
	cfg.Brokers = brokers
	cfg.Topic = testenv.UniqueName("ingest-openapi") // created by the service
	cfg.Partitions = 1
	cfg.MaxRecords = 3
	cfg.MaxBodyBytes = 4096
	t.Cleanup(func() {
		c := &kafka.Client{Addr: kafka.TCP(brokers...), Timeout: 10 * time.Second}
		_, _ = c.DeleteTopics(context.Background(), &kafka.DeleteTopicsRequest{Topics: []string{cfg.Topic}})
	})
	live := startService(t, cfg).url

	// An intake with feed keys: "open" may write any drone, "fleet" only
	// OAS-F- drones and one record an hour.
	openKey, fleetKey := "nofly_openapi-test-open", "nofly_openapi-test-fleet"
	keys := filepath.Join(t.TempDir(), "feeds")
	lines := (&feedkey.Feed{Name: "open", Hash: feedkey.Hash(openKey)}).Line() + "\n" +
		(&feedkey.Feed{Name: "fleet", Hash: feedkey.Hash(fleetKey), Prefixes: []string{"OAS-F-"}, Rate: 1, Per: time.Hour, Burst: 1}).Line() + "\n"
	if err := os.WriteFile(keys, []byte(lines), 0o600); err != nil {
		t.Fatal(err)
	}
	keyedCfg := cfg
	keyedCfg.FeedKeys = keys
	keyed := startService(t, keyedCfg).url
	bearer := func(key string) http.Header { return http.Header{"Authorization": {"Bearer " + key}} }

	// An intake whose broker is a closed port: live, never ready, and every
	// valid request gets 503.
	downCfg := DefaultConfig()
	downCfg.Addr = "127.0.0.1:0"
	downCfg.Brokers = []string{fmt.Sprintf("127.0.0.1:%d", testenv.FreePort(t))}
	downSvc, err := newService(downCfg, testLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- downSvc.run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	down := "http://" + downSvc.Addr()

	rec := func(seq int, extra string) string {
		return fmt.Sprintf(`{"drone_id":"OAS-1","seq":%d,"ts":"%s","lat":51.47,"lon":-0.46%s}`,
			seq, time.Now().UTC().Format(time.RFC3339Nano), extra)
	}
	// now(d) is the time d seconds from now; pastHour and tenthsPastHour
	// the same as Remote ID broadcasts it, in (tenths of) seconds past the
	// hour.
	now := func(d int) string {
		return time.Now().UTC().Add(time.Duration(d) * time.Second).Format(time.RFC3339Nano)
	}
	sincePastHour := func(d int) time.Duration {
		t := time.Now().UTC().Add(time.Duration(d) * time.Second)
		return t.Sub(t.Truncate(time.Hour))
	}
	pastHour := func(d int) string { return fmt.Sprintf("%.1f", sincePastHour(d).Seconds()) }
	tenthsPastHour := func(d int) string { return fmt.Sprint(int(sincePastHour(d).Seconds() * 10)) }
	const ndjson, js = "application/x-ndjson", "application/json"
	type verdict int
	const (
		notJudged verdict = iota // a limit the description states in prose
		valid
		invalid
	)
	tests := []struct {
		name             string
		base             string
		method, path     string
		contentType      string
		header           http.Header
		body             string
		request          verdict
		wantStatus       int
		wantLine         int      // of the first listed error, for 400s
		wantField        string   // of the first listed error, for 400s
		wantHeaderNonNil string   // a header the answer must carry
		wantWarnings     []string // "line field" of each warning of a 202, in order
	}{
		{name: "ndjson 202", base: live, method: "POST", path: "/v1/telemetry", contentType: ndjson,
			body:    rec(1, "") + "\n\n" + rec(2, `,"alt_m":85,"alt_ref":"WGS84","speed_mps":3,"heading_deg":359.5`) + "\n",
			request: valid, wantStatus: 202},
		{name: "ndjson alias 202", base: live, method: "POST", path: "/v1/telemetry", contentType: "application/ndjson",
			body: rec(3, ""), request: valid, wantStatus: 202},
		{name: "json object 202", base: live, method: "POST", path: "/v1/telemetry", contentType: js,
			body: rec(4, `,"agl_m":12,"unknown_field":"ignored"`), request: valid, wantStatus: 202},
		{name: "json array with nulls 202", base: live, method: "POST", path: "/v1/telemetry", contentType: js + "; charset=utf-8",
			body:    "[" + rec(5, `,"heading_deg":null,"alt_m":null,"alt_ref":null,"agl_m":null,"speed_mps":null`) + "]",
			request: valid, wantStatus: 202},
		{name: "optional fields outside every convention 202", base: live, method: "POST", path: "/v1/telemetry", contentType: ndjson,
			body: rec(21, `,"heading_deg":720,"speed_mps":"fast","alt_ref":"QNH","alt_m":100,"agl_m":[1]`) + "\n" +
				rec(22, `,"heading_deg":-90,"speed_mps":255,"alt_ref":"agl","alt_m":30,"agl_m":31`),
			request: valid, wantStatus: 202,
			wantWarnings: []string{"1 alt_ref", "1 alt_m", "1 agl_m", "1 speed_mps", "1 heading_deg", "2 alt_m", "2 agl_m"}},
		{name: "the pilot's position 202", base: live, method: "POST", path: "/v1/telemetry", contentType: ndjson,
			body: rec(25, `,"operator":{"lat":51.469,"lon":-0.452,"alt_m":95.5,"type":"live"}`) + "\n" +
				rec(26, `,"operator":{"lat":95,"lon":-0.452}`) + "\n" + rec(27, `,"operator":{"lat":51.469,"lon":-0.452,"type":"walking"}`),
			request: valid, wantStatus: 202, wantWarnings: []string{"2 operator.lat", "3 operator.type"}},
		{name: "rid with the pilot's position 202", base: live, method: "POST", path: "/v1/telemetry/rid", contentType: js,
			body: `{"flights":[{"id":"f-2","details":{"operator_location":{"position":{"lat":51.469,"lng":-0.452},"altitude_type":"Sideways"}},` +
				`"current_state":{"timestamp":"` + now(-2) + `","position":{"lat":51.47,"lng":-0.46}}}]}`,
			request: valid, wantStatus: 202, wantWarnings: []string{"1 flights[0].details.operator_location.altitude_type"}},
		{name: "odid core-c with its System message 202", base: live, method: "POST", path: "/v1/telemetry/odid", contentType: js,
			body: `[{"basic_id":{"UASID":"1596F35B"},"location":{"Latitude":51.47,"Longitude":-0.46,"TimeStamp":` + pastHour(-5) + `},` +
				`"system":{"OperatorLocationType":1,"OperatorLatitude":51.469,"OperatorLongitude":"x"}}]`,
			request: valid, wantStatus: 202, wantWarnings: []string{"1 [0].system.OperatorLongitude"}},
		{name: "gzip 202", base: live, method: "POST", path: "/v1/telemetry", contentType: ndjson,
			header: http.Header{"Content-Encoding": {"gzip"}}, body: gzipped(rec(23, "") + "\n" + rec(24, "")),
			request: notJudged, wantStatus: 202},
		{name: "ts in year 1 202", base: live, method: "POST", path: "/v1/telemetry", contentType: js,
			body: strings.Replace(rec(25, ""), time.Now().UTC().Format("2006"), "0001", 1), request: valid, wantStatus: 202},
		{name: "ndjson bad field on line 3 400", base: live, method: "POST", path: "/v1/telemetry", contentType: ndjson,
			body:    rec(6, "") + "\n\n" + strings.Replace(rec(7, ""), `"lat":51.47`, `"lat":91`, 1) + "\n",
			request: invalid, wantStatus: 400, wantLine: 3, wantField: "lat"},
		{name: "json array missing drone_id 400", base: live, method: "POST", path: "/v1/telemetry", contentType: js,
			body:    "[" + rec(8, "") + "," + strings.Replace(rec(9, ""), `"drone_id":"OAS-1",`, "", 1) + "]",
			request: invalid, wantStatus: 400, wantLine: 2, wantField: "drone_id"},
		{name: "drone_id null 400", base: live, method: "POST", path: "/v1/telemetry", contentType: js,
			body: strings.Replace(rec(10, ""), `"OAS-1"`, "null", 1), request: invalid, wantStatus: 400, wantLine: 1, wantField: "drone_id"},
		{name: "ts 3h ahead 400", base: live, method: "POST", path: "/v1/telemetry", contentType: js,
			body:    `{"drone_id":"OAS-1","seq":26,"ts":"` + time.Now().Add(3*time.Hour).UTC().Format(time.RFC3339) + `","lat":51.47,"lon":-0.46}`,
			request: valid, wantStatus: 400, wantLine: 1, wantField: "ts"},
		{name: "corrupt gzip 400", base: live, method: "POST", path: "/v1/telemetry", contentType: ndjson,
			header: http.Header{"Content-Encoding": {"gzip"}}, body: rec(27, ""), request: notJudged, wantStatus: 400},
		{name: "empty array 400", base: live, method: "POST", path: "/v1/telemetry", contentType: js,
			body: "[]", request: invalid, wantStatus: 400},
		{name: "malformed line 400", base: live, method: "POST", path: "/v1/telemetry", contentType: ndjson,
			body: rec(11, "") + "\n{\"drone_id\":\n", request: invalid, wantStatus: 400, wantLine: 2, wantField: ""},
		{name: "too many records 413", base: live, method: "POST", path: "/v1/telemetry", contentType: ndjson,
			body: strings.Join([]string{rec(12, ""), rec(13, ""), rec(14, ""), rec(15, "")}, "\n"), request: notJudged, wantStatus: 413},
		{name: "body too large 413", base: live, method: "POST", path: "/v1/telemetry", contentType: js,
			body: rec(16, `,"padding":"`+strings.Repeat("x", 5000)+`"`), request: notJudged, wantStatus: 413},
		{name: "text/plain 415", base: live, method: "POST", path: "/v1/telemetry", contentType: "text/plain",
			body: rec(17, ""), request: notJudged, wantStatus: 415},
		{name: "latin-1 charset 415", base: live, method: "POST", path: "/v1/telemetry", contentType: js + "; charset=iso-8859-1",
			body: rec(18, ""), request: notJudged, wantStatus: 415},
		{name: "brotli 415", base: live, method: "POST", path: "/v1/telemetry", contentType: js,
			header: http.Header{"Content-Encoding": {"br"}}, body: rec(19, ""), request: notJudged, wantStatus: 415},
		{name: "kafka away 503", base: down, method: "POST", path: "/v1/telemetry", contentType: ndjson,
			body: rec(20, ""), request: valid, wantStatus: 503, wantHeaderNonNil: "Retry-After"},
		{name: "keyed 202", base: keyed, method: "POST", path: "/v1/telemetry", contentType: ndjson,
			header: bearer(openKey), body: rec(28, ""), request: valid, wantStatus: 202},
		{name: "no key 401", base: keyed, method: "POST", path: "/v1/telemetry", contentType: ndjson,
			body: rec(29, ""), request: invalid, wantStatus: 401, wantHeaderNonNil: "WWW-Authenticate"},
		{name: "unknown key 401", base: keyed, method: "POST", path: "/v1/telemetry", contentType: ndjson,
			header: bearer("nofly_not-a-feed"), body: rec(30, ""), request: notJudged, wantStatus: 401, wantHeaderNonNil: "WWW-Authenticate"},
		{name: "drone outside the feed's prefixes 403", base: keyed, method: "POST", path: "/v1/telemetry", contentType: ndjson,
			header: bearer(fleetKey), body: rec(31, ""), request: valid, wantStatus: 403, wantLine: 1, wantField: "drone_id"},
		{name: "feed within its rate 202", base: keyed, method: "POST", path: "/v1/telemetry", contentType: ndjson,
			header: bearer(fleetKey), body: strings.Replace(rec(32, ""), "OAS-1", "OAS-F-1", 1), request: valid, wantStatus: 202},
		{name: "feed over its rate 429", base: keyed, method: "POST", path: "/v1/telemetry", contentType: ndjson,
			header: bearer(fleetKey), body: strings.Replace(rec(33, ""), "OAS-1", "OAS-F-1", 1), request: valid, wantStatus: 429,
			wantHeaderNonNil: "Retry-After"},
		{name: "rid 202 with a position left out", base: live, method: "POST", path: "/v1/telemetry/rid", contentType: js,
			body: `{"flights":[{"id":"f-1","uas_id":{"serial_number":"1596F35A"},"current_state":{"timestamp":{"value":"` + now(-2) +
				`","format":"RFC3339"},"track":361,"speed":4,"position":{"lat":51.47,"lng":-0.46,"alt":130,"accuracy_h":"HA3m","accuracy_v":"bogus",` +
				`"height":{"distance":55,"reference":"GroundLevel"}}},"recent_positions":[{"time":"` + now(-3) + `","position":{"lat":0,"lng":0}}]}]}`,
			request: valid, wantStatus: 202,
			wantWarnings: []string{"1 flights[0].recent_positions[0]", "1 flights[0].current_state.position.accuracy_v"}},
		{name: "rid lat out of range 400", base: live, method: "POST", path: "/v1/telemetry/rid", contentType: js,
			body:    `{"flights":[{"id":"f-1","current_state":{"timestamp":"` + now(-2) + `","position":{"lat":95,"lng":-0.46}}}]}`,
			request: invalid, wantStatus: 400, wantLine: 1, wantField: "flights[0].current_state.position.lat"},
		{name: "rid flight without a name 400", base: live, method: "POST", path: "/v1/telemetry/rid", contentType: js,
			body:    `{"flights":[{"id":" ","current_state":{"timestamp":"` + now(-2) + `","position":{"lat":51.47,"lng":-0.46}}}]}`,
			request: invalid, wantStatus: 400, wantLine: 1, wantField: "flights[0].id"},
		{name: "rid as ndjson 415", base: live, method: "POST", path: "/v1/telemetry/rid", contentType: ndjson,
			body: `{"flights":[]}`, request: notJudged, wantStatus: 415},
		{name: "odid core-c 202", base: live, method: "POST", path: "/v1/telemetry/odid", contentType: js,
			body: `[{"basic_id":{"UASID":"1596F35A"},"location":{"Latitude":51.47,"Longitude":-0.46,"AltitudeGeo":130,"HeightType":1,` +
				`"Height":40,"Direction":361,"SpeedHorizontal":255,"HorizAccuracy":10,"VertAccuracy":"x","TimeStamp":` + pastHour(-5) + `}}]`,
			request: valid, wantStatus: 202, wantWarnings: []string{"1 [0].location.VertAccuracy"}},
		{name: "odid librid pack 202", base: live, method: "POST", path: "/v1/telemetry/odid", contentType: js,
			body: `{"messages":[{"message_type":0,"uas_id":"LIBRID-7"},{"message_type":1,"latitude":51.47,"longitude":-0.46,` +
				`"geodetic_altitude":120,"timestamp":` + tenthsPastHour(-5) + `},{"message_type":4}]}`,
			request: valid, wantStatus: 202},
		{name: "odid without a uas id 400", base: live, method: "POST", path: "/v1/telemetry/odid", contentType: js,
			body:    `{"location":{"Latitude":51.47,"Longitude":-0.46,"TimeStamp":1}}`,
			request: invalid, wantStatus: 400, wantLine: 1, wantField: "[0].basic_id.UASID"},
		{name: "odid pack without a location 400", base: live, method: "POST", path: "/v1/telemetry/odid", contentType: js,
			body:    `{"messages":[{"message_type":0,"uas_id":"LIBRID-7"}]}`,
			request: invalid, wantStatus: 400, wantLine: 1, wantField: "[0].messages"},
		{name: "healthz", base: live, method: "GET", path: "/healthz", wantStatus: 200},
		{name: "readyz", base: live, method: "GET", path: "/readyz", wantStatus: 200},
		{name: "readyz kafka away", base: down, method: "GET", path: "/readyz", wantStatus: 503},
		{name: "metrics", base: live, method: "GET", path: "/metrics", wantStatus: 200},
		{name: "openapi.yaml", base: live, method: "GET", path: "/openapi.yaml", wantStatus: 200},
	}
	seen := map[int]bool{}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			newReq := func() *http.Request {
				req, err := http.NewRequest(tt.method, tt.base+tt.path, strings.NewReader(tt.body))
				if err != nil {
					t.Fatal(err)
				}
				if tt.contentType != "" {
					req.Header.Set("Content-Type", tt.contentType)
				}
				for k, v := range tt.header {
					req.Header[k] = v
				}
				return req
			}
			route, params, err := router.FindRoute(newReq())
			if err != nil {
				t.Fatalf("openapi.yaml has no operation for %s %s: %v", tt.method, tt.path, err)
			}
			// Without a key file ingest needs no key (from loopback); with one
			// the description's bearer scheme is checked.
			auth := openapi3filter.NoopAuthenticationFunc
			if tt.base == keyed {
				auth = requireBearer
			}
			in := &openapi3filter.RequestValidationInput{Request: newReq(), PathParams: params, Route: route,
				Options: &openapi3filter.Options{MultiError: true, AuthenticationFunc: auth}}
			if tt.request != notJudged {
				err := openapi3filter.ValidateRequest(context.Background(), in)
				if tt.request == valid && err != nil {
					t.Errorf("openapi.yaml refuses the request: %v", err)
				}
				if tt.request == invalid && err == nil {
					t.Errorf("openapi.yaml allows the request, which the server refuses")
				}
			}

			res, err := http.DefaultClient.Do(newReq())
			if err != nil {
				t.Fatal(err)
			}
			body, err := io.ReadAll(res.Body)
			res.Body.Close()
			if err != nil {
				t.Fatal(err)
			}
			if res.StatusCode != tt.wantStatus {
				t.Fatalf("status %d, want %d; body %s", res.StatusCode, tt.wantStatus, body)
			}
			seen[res.StatusCode] = true
			if tt.wantHeaderNonNil != "" && res.Header.Get(tt.wantHeaderNonNil) == "" {
				t.Errorf("no %s header", tt.wantHeaderNonNil)
			}
			checkResponse(t, in, route, res, body)
			if tt.wantLine > 0 {
				var rej struct {
					Errors []struct {
						Line  int    `json:"line"`
						Field string `json:"field"`
					} `json:"errors"`
				}
				if err := json.Unmarshal(body, &rej); err != nil || len(rej.Errors) == 0 ||
					rej.Errors[0].Line != tt.wantLine || rej.Errors[0].Field != tt.wantField {
					t.Errorf("errors %s; want the first at line %d, field %q", body, tt.wantLine, tt.wantField)
				}
			}
			if tt.wantStatus == 202 {
				var acc struct {
					Warnings []struct {
						Line  int    `json:"line"`
						Field string `json:"field"`
					} `json:"warnings"`
				}
				if err := json.Unmarshal(body, &acc); err != nil {
					t.Fatal(err)
				}
				var got []string
				for _, w := range acc.Warnings {
					got = append(got, fmt.Sprintf("%d %s", w.Line, w.Field))
				}
				if !slices.Equal(got, tt.wantWarnings) {
					t.Errorf("warnings %s; want %q", body, tt.wantWarnings)
				}
			}
			if tt.path == "/metrics" {
				checkMetricsDescribed(t, route.Operation.Description, body)
			}
			if tt.path == "/openapi.yaml" && !bytes.Equal(body, openapiYAML) {
				t.Errorf("/openapi.yaml serves %d bytes that are not the embedded description", len(body))
			}
		})
	}
	for _, code := range []int{200, 202, 400, 401, 403, 413, 415, 429, 503} {
		if !seen[code] {
			t.Errorf("no request got %d", code)
		}
	}
}

// checkResponse validates one real answer against the operation of route:
// the status must be documented, the headers and the body must match.
func checkResponse(t *testing.T, in *openapi3filter.RequestValidationInput, route *routers.Route, res *http.Response, body []byte) {
	t.Helper()
	out := &openapi3filter.ResponseValidationInput{RequestValidationInput: in, Status: res.StatusCode, Header: res.Header,
		Body: io.NopCloser(bytes.NewReader(body)), Options: &openapi3filter.Options{IncludeResponseStatus: true, MultiError: true}}
	if err := openapi3filter.ValidateResponse(context.Background(), out); err != nil {
		t.Errorf("%s %s answered %d %q, which openapi.yaml does not describe: %v\nbody: %.500s",
			route.Method, route.Path, res.StatusCode, res.Header.Get("Content-Type"), err, body)
	}
	// Every header the description requires for this status is present.
	if r := route.Operation.Responses.Status(res.StatusCode); r != nil && r.Value != nil {
		for name, h := range r.Value.Headers {
			if _, ok := res.Header[http.CanonicalHeaderKey(name)]; !ok && h.Value != nil && h.Value.Required {
				t.Errorf("%d lacks the header %s that openapi.yaml requires", res.StatusCode, name)
			}
		}
	}
}

func gzipped(s string) string {
	var b bytes.Buffer
	zw := gzip.NewWriter(&b)
	_, _ = zw.Write([]byte(s))
	_ = zw.Close()
	return b.String()
}

// requireBearer is the description's bearer scheme: the request carries
// "Authorization: Bearer <key>" (whether the key is a feed's is the server's
// to say).
func requireBearer(_ context.Context, in *openapi3filter.AuthenticationInput) error {
	scheme, key, _ := strings.Cut(in.RequestValidationInput.Request.Header.Get("Authorization"), " ")
	if !strings.EqualFold(scheme, "Bearer") || key == "" {
		return errors.New("no Bearer key")
	}
	return nil
}

// checkMetricsDescribed: the nofly_ metric families /metrics exposes are
// the ones the operation's description names.
func checkMetricsDescribed(t *testing.T, description string, exposition []byte) {
	t.Helper()
	named := map[string]bool{}
	for _, m := range regexp.MustCompile(`nofly_[a-z0-9_]+`).FindAllString(description, -1) {
		named[m] = true
	}
	exposed := map[string]bool{}
	for _, m := range regexp.MustCompile(`(?m)^# TYPE (nofly_[a-z0-9_]+) `).FindAllSubmatch(exposition, -1) {
		exposed[string(m[1])] = true
	}
	for m := range exposed {
		if !named[m] {
			t.Errorf("/metrics exposes %s, which the description of /metrics does not name", m)
		}
	}
	for m := range named {
		// The lag gauges have series only once a consumer group has
		// committed offsets on the topic (TestLagWatcher shows them).
		if !exposed[m] && !slices.Contains(lagFamilies, m) {
			t.Errorf("the description of /metrics names %s, which /metrics does not expose", m)
		}
	}
}

// lagFamilies are lag.go's per-group gauges.
var lagFamilies = []string{"nofly_ingest_consumer_lag_records", "nofly_ingest_consumer_lag_seconds"}
