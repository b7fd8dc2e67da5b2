package geofence

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestHostileZoneText: CheckText refuses invalid UTF-8 and nesting past
// MaxDepth, naming the JSON path and the byte; every parser runs it, a
// zone file too.
func TestHostileZoneText(t *testing.T) {
	deep := func(n int) string { return strings.Repeat("[", n) + strings.Repeat("]", n) }
	tests := []struct {
		name, doc  string
		field, msg string // "" msg: accepted
	}{
		{"valid", `{"a":[1,{"b":"ü"}]}`, "", ""},
		{"64 deep", deep(64), "", ""},
		{"65 deep", deep(65), strings.Repeat("[0]", 64), "nested deeper than 64"},
		{"9000 deep in a value", `{"features":[{"properties":{"x":` + deep(9000) + `}}]}`, "features[0].properties.x" + strings.Repeat("[0]", 60), "nested deeper than 64"},
		{"brackets in strings do not count", `{"s":"` + strings.Repeat("[", 100) + `"}`, "", ""},
		{"bad byte in a value", `{"features":[{},{"properties":{"name":"a` + "\xff" + `"}}]}`, "features[1].properties.name", "invalid UTF-8 at byte 40"},
		{"bad byte in a key", `{"a":{"k` + "\xc3" + `":1}}`, "a.\"k\ufffd\" (a key)", "invalid UTF-8 at byte 8"},
		{"an odd key", `{"we ird.key":["` + "\xfe" + `"]}`, `"we ird.key"[0]`, "invalid UTF-8"},
		{"escaped quotes before", `{"a\"b":"\"","c":"` + "\x80" + `"}`, "c", "invalid UTF-8"},
	}
	for _, tt := range tests {
		err := CheckText([]byte(tt.doc))
		if tt.msg == "" {
			if err != nil {
				t.Errorf("%s: %v", tt.name, err)
			}
			continue
		}
		var ve *ValidationError
		if !errors.As(err, &ve) || len(ve.Problems) != 1 {
			t.Errorf("%s: %v, want one problem", tt.name, err)
			continue
		}
		p := ve.Problems[0]
		if p.Field != tt.field || !strings.Contains(p.Msg, tt.msg) {
			t.Errorf("%s: field %q msg %q, want %q and %q", tt.name, p.Field, p.Msg, tt.field, tt.msg)
		}
	}
	f := filepath.Join(t.TempDir(), "zones.geojson")
	if err := os.WriteFile(f, []byte(`{"type":"FeatureCollection","features":[{"type":"Feature","properties":{"id":"A","name":"`+"\xff"+`"},"geometry":{"type":"Point","coordinates":[0,0]}}]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadFile(f); err == nil || !strings.Contains(err.Error(), f+": features[0].properties.name: invalid UTF-8") {
		t.Errorf("LoadFile: %v", err)
	}
	for _, parse := range []func(string) error{
		func(s string) error { _, err := ParseGeoJSON(strings.NewReader(s)); return err },
		func(s string) error { _, err := ParseED269(strings.NewReader(s)); return err },
		func(s string) error { _, err := ParseED318(strings.NewReader(s)); return err },
	} {
		if err := parse(deep(100)); err == nil || !strings.Contains(err.Error(), "nested deeper") {
			t.Errorf("a parser took 100-deep nesting: %v", err)
		}
	}
}

// TestHostileZoneIDs: a zone id is 1-256 characters without a control
// character; a longer one is refused and not echoed whole.
func TestHostileZoneIDs(t *testing.T) {
	feature := func(id string) string {
		return `{"type":"FeatureCollection","features":[{"type":"Feature","properties":{"id":` + jsonString(id) + `,"radius_m":100},"geometry":{"type":"Point","coordinates":[0,0]}}]}`
	}
	for _, id := range []string{"A", "a/b", "50%", "Ü", strings.Repeat("é", MaxIDLen), "history"} {
		if _, _, err := Parse(strings.NewReader(feature(id))); err != nil {
			t.Errorf("id %.20q: %v", id, err)
		}
	}
	for _, id := range []string{strings.Repeat("x", MaxIDLen+1), "a\nb", "tab\t", "del\x7f"} {
		_, _, err := Parse(strings.NewReader(feature(id)))
		if err == nil || !strings.Contains(err.Error(), "properties.id") {
			t.Errorf("id %.20q: %v, want a problem naming properties.id", id, err)
		}
		if err != nil && len(err.Error()) > MaxIDLen*4 {
			t.Errorf("id %.20q: the error echoes %d bytes", id, len(err.Error()))
		}
	}
}

func jsonString(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for _, r := range s {
		switch {
		case r == '"' || r == '\\':
			b.WriteString(`\` + string(r))
		case r < 0x20 || r == 0x7f:
			b.WriteString(`\u00` + "0123456789abcdef"[r>>4:r>>4+1] + "0123456789abcdef"[r&15:r&15+1])
		default:
			b.WriteRune(r)
		}
	}
	b.WriteByte('"')
	return b.String()
}
