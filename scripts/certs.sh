#!/usr/bin/env bash
# Generates, with openssl, the certificates of the secured test services:
#
#   scripts/certs.sh DIR
#
#   DIR/ca.pem,     DIR/ca.key        a CA that signs the two below
#   DIR/server.pem, DIR/server.key    the servers' (SANs 127.0.0.1, ::1, localhost)
#   DIR/client.pem, DIR/client.key    a client's, for servers that verify one
#
# Keys are PKCS#8, unencrypted, mode 0600 (Kafka's PEM key store and Redis
# read them as they are). Idempotent: a set that is complete, chains to its CA
# and is valid for another day is kept, anything else is made anew (all of
# it, so the certificates always chain to the CA beside them). For tests on
# loopback only: the CA's key lies next to what it signed.
set -euo pipefail
source "$(dirname "$0")/common.sh"

DIR=${1:-}
[[ -n $DIR ]] || { echo "usage: $0 DIR" >&2; exit 2; }
command -v openssl >/dev/null || apt_install openssl
mkdir -p "$DIR"
DAYS=${CERT_DAYS:-30}

complete() {
  local f
  for f in ca.pem ca.key server.pem server.key client.pem client.key; do [[ -s $DIR/$f ]] || return 1; done
  for f in server client; do
    openssl verify -CAfile "$DIR/ca.pem" "$DIR/$f.pem" >/dev/null 2>&1 || return 1
    openssl x509 -in "$DIR/$f.pem" -noout -checkend 86400 >/dev/null 2>&1 || return 1
  done
}

# newkey NAME: an EC P-256 key in PKCS#8 (fast to make, and every TLS stack
# here speaks ECDSA).
newkey() { openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$TMP/$1.key" 2>/dev/null; }

# sign NAME SUBJECT EXTENSIONS: a certificate for NAME's key, signed by the CA.
sign() {
  openssl req -new -key "$TMP/$1.key" -subj "$2" -out "$TMP/$1.csr" 2>/dev/null
  printf '%s\n' "$3" >"$TMP/$1.ext"
  openssl x509 -req -in "$TMP/$1.csr" -CA "$TMP/ca.pem" -CAkey "$TMP/ca.key" -CAcreateserial \
    -days "$DAYS" -sha256 -extfile "$TMP/$1.ext" -out "$TMP/$1.pem" 2>/dev/null
}

generate() {
  TMP=$(mktemp -d "$DIR/.certs.XXXXXX")
  trap 'rm -rf "$TMP"' RETURN
  umask 077
  newkey ca
  openssl req -x509 -new -key "$TMP/ca.key" -subj "/CN=nofly test CA" -days "$DAYS" -sha256 \
    -addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign,cRLSign" \
    -out "$TMP/ca.pem" 2>/dev/null
  newkey server
  sign server "/CN=localhost" "basicConstraints=CA:FALSE
keyUsage=critical,digitalSignature
extendedKeyUsage=serverAuth
subjectAltName=IP:127.0.0.1,IP:::1,DNS:localhost"
  newkey client
  sign client "/CN=nofly-client" "basicConstraints=CA:FALSE
keyUsage=critical,digitalSignature
extendedKeyUsage=clientAuth"
  chmod 0644 "$TMP"/*.pem
  chmod 0600 "$TMP"/*.key
  # Renamed into place only after all were made: a failure while making
  # them leaves the old set as it was.
  local f
  for f in ca server client; do
    mv -f "$TMP/$f.key" "$DIR/$f.key"
    mv -f "$TMP/$f.pem" "$DIR/$f.pem"
  done
  log "certificates in $DIR: CA, server (127.0.0.1, ::1, localhost), client; valid $DAYS days"
}

# Two starts sharing DIR must not generate over each other.
exec 9>"$DIR/.certs.lock"
flock 9
complete || generate
