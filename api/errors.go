package api

import (
	"encoding/json"
	"net/http"
)

// writeJSON writes v as the JSON answer with status. A value that cannot be
// encoded is a 500 with the error body, never a half-written answer.
func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		status, b = http.StatusInternalServerError, []byte(`{"error":"could not encode the answer","code":"internal","details":{}}`)
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(append(b, '\n'))
}

// errorBody is the body of every error answer. Code is a stable machine
// name (bad_request, unauthorized, forbidden, not_found, ...); a 400 names
// the field in Details["field"].
type errorBody struct {
	Error   string         `json:"error"`
	Code    string         `json:"code"`
	Details map[string]any `json:"details"`
}

// writeError writes the error body {"error", "code", "details"}; details is
// {} when nil, so clients can always index it.
func writeError(w http.ResponseWriter, status int, code, msg string, details map[string]any) {
	if details == nil {
		details = map[string]any{}
	}
	writeJSON(w, status, errorBody{Error: msg, Code: code, Details: details})
}
