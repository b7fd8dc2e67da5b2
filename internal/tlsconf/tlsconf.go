// Package tlsconf builds the client side of a TLS connection from files: a
// CA bundle to trust, and a certificate and key to present. Kafka's and
// Redis's connection settings both use it, so the two read files, and fail
// on bad ones, the same way.
package tlsconf

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
)

// Files names the PEM files of a client's TLS settings; each is optional.
type Files struct {
	CA   string // CA certificates to trust; "" = the system's roots
	Cert string // client certificate, for servers that require one
	Key  string // its private key; given with Cert, never alone
}

// Load reads the files into a client tls.Config (TLS 1.2 at least). A file
// that is missing, unreadable or holds no certificate is an error naming it.
func (f Files) Load() (*tls.Config, error) {
	c := &tls.Config{MinVersion: tls.VersionTLS12}
	if f.CA != "" {
		pem, err := os.ReadFile(f.CA)
		if err != nil {
			return nil, fmt.Errorf("TLS CA file: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("TLS CA file %s: no PEM certificate in it", f.CA)
		}
		c.RootCAs = pool
	}
	switch {
	case f.Cert != "" && f.Key != "":
		pair, err := tls.LoadX509KeyPair(f.Cert, f.Key)
		if err != nil {
			return nil, fmt.Errorf("TLS client certificate %s / key %s: %w", f.Cert, f.Key, err)
		}
		c.Certificates = []tls.Certificate{pair}
	case f.Cert != "" || f.Key != "":
		return nil, errors.New("TLS client certificate and key go together: give both files or neither")
	}
	return c, nil
}

// Any reports whether a file is named (naming one turns TLS on).
func (f Files) Any() bool { return f.CA != "" || f.Cert != "" || f.Key != "" }
