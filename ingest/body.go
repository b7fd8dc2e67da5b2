package ingest

import (
	"bytes"
	"compress/flate"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
)

const reasonBadEncoding = "bad_encoding"

// contentCoding reads Content-Encoding: "" for none (or identity), "gzip",
// or the unsupported coding to name in a 415.
func contentCoding(h string) (coding string, ok bool) {
	var codings []string
	for _, c := range strings.Split(h, ",") {
		c = strings.ToLower(strings.TrimSpace(c))
		if c != "" && c != "identity" {
			codings = append(codings, c)
		}
	}
	switch {
	case len(codings) == 0:
		return "", true
	case len(codings) == 1 && (codings[0] == "gzip" || codings[0] == "x-gzip"):
		return "gzip", true
	default:
		return strings.TrimSpace(h), false
	}
}

// readBody reads the request body into buf, decompressing it when coding is
// gzip. limit bounds the body as sent and, for gzip, the body decompressed:
// reading stops one byte past it, so a small stream that inflates to
// gigabytes (a gzip bomb) costs no more memory than a body at the limit.
// A body over the limit is 413; a corrupt or truncated gzip stream is 400.
func readBody(w http.ResponseWriter, r *http.Request, buf *bytes.Buffer, coding string, limit int64) *rejection {
	var src io.Reader = http.MaxBytesReader(w, r.Body, limit)
	if coding == "gzip" {
		zr, err := gzip.NewReader(src)
		if err != nil {
			return bodyError(err, limit, true)
		}
		defer zr.Close()
		src = io.LimitReader(zr, limit+1)
	}
	if _, err := buf.ReadFrom(src); err != nil {
		return bodyError(err, limit, coding == "gzip")
	}
	if int64(buf.Len()) > limit {
		return &rejection{status: http.StatusRequestEntityTooLarge, reason: reasonBodyTooBig,
			message: fmt.Sprintf("body decompressed is more than the limit of %d bytes", limit)}
	}
	return nil
}

func bodyError(err error, limit int64, gz bool) *rejection {
	var tooBig *http.MaxBytesError
	var corrupt flate.CorruptInputError
	switch {
	case errors.As(err, &tooBig):
		return &rejection{status: http.StatusRequestEntityTooLarge, reason: reasonBodyTooBig,
			message: fmt.Sprintf("body is more than the limit of %d bytes", limit)}
	case gz && (errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF)):
		return &rejection{status: http.StatusBadRequest, reason: reasonBadEncoding, cause: err,
			message: "body is not a valid gzip stream (Content-Encoding: gzip): it ends before the stream does"}
	case gz && (errors.Is(err, gzip.ErrHeader) || errors.Is(err, gzip.ErrChecksum) || errors.As(err, &corrupt)):
		return &rejection{status: http.StatusBadRequest, reason: reasonBadEncoding, cause: err,
			message: "body is not a valid gzip stream (Content-Encoding: gzip): " + err.Error()}
	default:
		return &rejection{status: http.StatusBadRequest, reason: "read_error", cause: err,
			message: "reading the body: " + err.Error()}
	}
}
