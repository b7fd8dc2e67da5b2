package remoteid

import (
	"crypto/sha256"
	"encoding/hex"

	"github.com/nofly-dev/nofly/telemetry"
)

// DroneID maps an identifier from a feed (a USS's flight id, a serial
// number, a registration) to a drone_id ([A-Za-z0-9._:-], 1-64 characters),
// deterministically, so the same aircraft always gets the same id:
//
//   - an identifier already in the alphabet and at most 64 characters is
//     kept as it is;
//   - any other is cut to its first 47 characters with each byte outside
//     the alphabet replaced by '_', followed by '.' and the first 16 hex
//     digits of its SHA-256 — so two identifiers that differ only in the
//     replaced characters, or after the cut, still get different ids.
//
// An empty identifier has no drone_id ("", false).
func DroneID(raw string) (string, bool) {
	if raw == "" {
		return "", false
	}
	if len(raw) <= telemetry.MaxDroneIDLen && inAlphabet(raw) {
		return raw, true
	}
	const keep = telemetry.MaxDroneIDLen - 17
	b := make([]byte, 0, telemetry.MaxDroneIDLen)
	for i := 0; i < len(raw) && len(b) < keep; i++ {
		if c := raw[i]; idByte(c) {
			b = append(b, c)
		} else {
			b = append(b, '_')
		}
	}
	sum := sha256.Sum256([]byte(raw))
	b = append(b, '.')
	b = hex.AppendEncode(b, sum[:8])
	return string(b), true
}

func inAlphabet(s string) bool {
	for i := 0; i < len(s); i++ {
		if !idByte(s[i]) {
			return false
		}
	}
	return true
}

func idByte(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == ':' || c == '-'
}
