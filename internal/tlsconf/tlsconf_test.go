package tlsconf

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// writePair writes a self-signed certificate and its key as PEM files.
func writePair(t *testing.T, dir string) (cert, key string) {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "test"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), IsCA: true, BasicConstraintsValid: true}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &k.PublicKey, k)
	if err != nil {
		t.Fatal(err)
	}
	kb, err := x509.MarshalECPrivateKey(k)
	if err != nil {
		t.Fatal(err)
	}
	cert, key = filepath.Join(dir, "c.pem"), filepath.Join(dir, "k.pem")
	for p, b := range map[string]*pem.Block{cert: {Type: "CERTIFICATE", Bytes: der}, key: {Type: "EC PRIVATE KEY", Bytes: kb}} {
		if err := os.WriteFile(p, pem.EncodeToMemory(b), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return cert, key
}

func TestLoad(t *testing.T) {
	dir := t.TempDir()
	cert, key := writePair(t, dir)
	junk := filepath.Join(dir, "junk.pem")
	if err := os.WriteFile(junk, []byte("not a certificate"), 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		f       Files
		wantErr string // "" = no error
		roots   bool
		certs   int
	}{
		{"none", Files{}, "", false, 0},
		{"ca", Files{CA: cert}, "", true, 0},
		{"ca and pair", Files{CA: cert, Cert: cert, Key: key}, "", true, 1},
		{"missing ca", Files{CA: filepath.Join(dir, "nope.pem")}, "nope.pem", false, 0},
		{"junk ca", Files{CA: junk}, "no PEM certificate", false, 0},
		{"cert without key", Files{Cert: cert}, "go together", false, 0},
		{"key without cert", Files{Key: key}, "go together", false, 0},
		{"junk pair", Files{Cert: junk, Key: key}, "junk.pem", false, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c, err := tc.f.Load()
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want one containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if (c.RootCAs != nil) != tc.roots || len(c.Certificates) != tc.certs {
				t.Errorf("roots set %v, %d certificates; want %v, %d", c.RootCAs != nil, len(c.Certificates), tc.roots, tc.certs)
			}
		})
	}
}
