package ingest

import (
	"context"
	"net/http"

	"github.com/nofly-dev/nofly/feeds/remoteid"
	"github.com/nofly-dev/nofly/telemetry"
)

// Remote ID routes. They are POST /v1/telemetry with another decoder: the
// same authentication, limits (the body limit on the body as sent, the
// record limit on the positions it converts to), validation of every
// converted position by package telemetry, clock bounds, produce path and
// answers. In a 400 (and a 202's warnings) "line" is the flight's (RID) or
// message's (ODID) index + 1 and "field" the JSON path of the field in the
// body as sent, e.g. "flights[1].current_state.position.lat".
const (
	RouteRID  = "/v1/telemetry/rid"
	RouteODID = "/v1/telemetry/odid"
)

// decoderSet maps the Content-Types a route accepts to their decoders.
type decoderSet map[string]func([]byte, decodeOpts) (batch, *rejection)

type decodersKey struct{}

// withDecoders makes postTelemetry decode the request with set.
func withDecoders(set decoderSet) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), decodersKey{}, set)))
		})
	}
}

// decodersOf returns the decoders of the request's route: the telemetry
// records' own unless the route set others.
func decodersOf(r *http.Request) decoderSet {
	if set, ok := r.Context().Value(decodersKey{}).(decoderSet); ok {
		return set
	}
	return mediaTypes
}

var (
	ridDecoders  = decoderSet{"application/json": decodeRID}
	odidDecoders = decoderSet{"application/json": decodeODID}
)

// decodeRID reads a Network Remote ID flights answer (remoteid.Flights).
func decodeRID(body []byte, o decodeOpts) (batch, *rejection) {
	return decodeFixes(remoteid.Flights(telemetry.TrimBOM(body)), o)
}

// decodeODID reads OpenDroneID Location messages (remoteid.ODID), their
// seconds past the hour resolved against the receive time unless the
// message says when it was heard.
func decodeODID(body []byte, o decodeOpts) (batch, *rejection) {
	return decodeFixes(remoteid.ODID(telemetry.TrimBOM(body), o.now), o)
}

// decodeFixes puts converted positions through the decoder every record
// goes through, renaming the fields of its errors and warnings to the
// feed's own.
func decodeFixes(res remoteid.Result, o decodeOpts) (batch, *rejection) {
	d := decoder{decodeOpts: o}
	if len(res.Errors) > 0 {
		// "n of m records invalid": counted in flights or messages.
		d.nRecords = max(res.Items, 1)
		bad := map[int]bool{}
		for _, e := range res.Errors {
			bad[e.Item] = true
			d.fail(e.Item+1, e.Path, e.Err)
		}
		d.nErrs = len(bad)
		return d.result()
	}
	for i := range res.Fixes {
		x := &res.Fixes[i]
		nErrs, nWarns := len(d.errs), len(d.b.warnings)
		if rej := d.record(x.Item+1, x.Pos.AppendJSON(nil)); rej != nil {
			return batch{}, rej
		}
		for j := nErrs; j < len(d.errs); j++ {
			d.errs[j].Field = x.SourceField(d.errs[j].Field)
		}
		for j := nWarns; j < len(d.b.warnings); j++ {
			d.b.warnings[j].Field = x.SourceField(d.b.warnings[j].Field)
		}
	}
	for _, s := range append(res.Skipped, res.Notes...) {
		d.b.nWarnings++
		if len(d.b.warnings) < maxListedErrors {
			d.b.warnings = append(d.b.warnings, LineWarning{Line: s.Item + 1, Field: s.Path, Warning: s.Why})
		}
	}
	return d.result()
}
