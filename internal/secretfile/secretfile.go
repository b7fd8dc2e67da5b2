// Package secretfile reads a secret (a password) from a file, so that no
// secret is ever a flag or an environment variable's value: those show in
// process listings, shell histories and crash reports.
package secretfile

import (
	"fmt"
	"os"
	"strings"
)

// Read returns the first line of file: a trailing newline (as an editor or
// `echo` leaves) is not part of the secret. An empty first line is an
// error, so a truncated file is not read as "no password". The error names
// the file, never what is in it.
func Read(file string) (string, error) {
	b, err := os.ReadFile(file)
	if err != nil {
		return "", fmt.Errorf("password file: %w", err)
	}
	pw, _, _ := strings.Cut(string(b), "\n")
	pw = strings.TrimSuffix(pw, "\r")
	if pw == "" {
		return "", fmt.Errorf("password file %s: the first line is empty", file)
	}
	return pw, nil
}
