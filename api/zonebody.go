package api

import (
	"errors"
	"net/http"

	"github.com/nofly-dev/nofly/geofence"
)

// zoneText refuses, before anything else reads it, a zone body that is not
// valid UTF-8 or nests arrays and objects deeper than geofence.MaxDepth
// (geofence.CheckText): stored, such a document would break its readers'
// JSON parsers for as long as its version is retained. The 400 names the
// field (a JSON path in the body) and the byte.
func zoneText(b []byte) *apiError {
	err := geofence.CheckText(b)
	if err == nil {
		return nil
	}
	var ve *geofence.ValidationError
	if errors.As(err, &ve) && len(ve.Problems) > 0 {
		p := ve.Problems[0]
		field := p.Field
		if field == "" {
			field = "body"
		}
		return &apiError{http.StatusBadRequest, "bad_request", "body: " + p.String(), map[string]any{"field": field, "problems": ve.Problems}}
	}
	return &apiError{http.StatusBadRequest, "bad_request", "body: " + err.Error(), map[string]any{"field": "body"}}
}
