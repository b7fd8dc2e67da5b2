package secretfile

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestRead(t *testing.T) {
	dir := t.TempDir()
	tests := []struct {
		name, content, want, wantErr string
	}{
		{"bare", "s3cret", "s3cret", ""},
		{"newline", "s3cret\n", "s3cret", ""},
		{"crlf", "s3cret\r\n", "s3cret", ""},
		{"only the first line", "s3cret\nother\n", "s3cret", ""},
		{"spaces kept", " s3 cret ", " s3 cret ", ""},
		{"empty", "", "", "first line is empty"},
		{"empty first line", "\ns3cret", "", "first line is empty"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := filepath.Join(dir, strings.ReplaceAll(tc.name, " ", "_"))
			if err := os.WriteFile(f, []byte(tc.content), 0o600); err != nil {
				t.Fatal(err)
			}
			got, err := Read(f)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) || (tc.content != "" && strings.Contains(err.Error(), "s3cret")) {
					t.Fatalf("err = %v, want one containing %q and not the content", err, tc.wantErr)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("Read = %q, %v; want %q", got, err, tc.want)
			}
		})
	}
	if _, err := Read(filepath.Join(dir, "missing")); err == nil || !strings.Contains(err.Error(), "missing") {
		t.Errorf("missing file: err = %v", err)
	}
}
