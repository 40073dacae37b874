package flux

import (
	"crypto/hmac"
	"crypto/sha1" //nolint:gosec // sha1 is one of the hashes a generic-hmac Provider may use
	"crypto/sha256"
	"crypto/sha512"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"strings"
)

// Signature errors; each is answered 401.
var (
	ErrSignatureMissing   = errors.New("missing " + SignatureHeader + " header")
	ErrSignatureMalformed = errors.New("malformed " + SignatureHeader + " header: want <hash>=<hex>")
	ErrSignatureHash      = errors.New("unsupported " + SignatureHeader + " hash: want sha1, sha224, sha256, sha384 or sha512")
	ErrSignatureMismatch  = errors.New(SignatureHeader + " does not match the body")
)

// ErrStaleEvent wraps the refusal of a signed event whose timestamp is missing or outside the replay window; it is
// answered 400, which notification-controller does not retry.
var ErrStaleEvent = errors.New("stale event")

// ErrNoToken is NewReceiver's error when neither Token nor AllowUnsigned is set.
var ErrNoToken = errors.New("no HMAC token: the receiver would accept events from anyone who can reach it")

// signatureHashes are the hashes a generic-hmac Provider's X-Signature may name (Flux sends sha256).
var signatureHashes = map[string]func() hash.Hash{
	"sha1":   sha1.New,
	"sha224": sha256.New224,
	"sha256": sha256.New,
	"sha384": sha512.New384,
	"sha512": sha512.New,
}

// VerifySignature checks header ("sha256=<hex>") against the HMAC of body keyed with token, in constant time.
func VerifySignature(body []byte, header string, token []byte) error {
	if header == "" {
		return ErrSignatureMissing
	}
	name, sig, ok := strings.Cut(strings.TrimSpace(header), "=")
	if !ok || sig == "" {
		return ErrSignatureMalformed
	}
	newHash, ok := signatureHashes[strings.ToLower(name)]
	if !ok {
		return ErrSignatureHash
	}
	want, err := hex.DecodeString(sig)
	if err != nil {
		return ErrSignatureMalformed
	}
	mac := hmac.New(newHash, token)
	mac.Write(body)
	if !hmac.Equal(mac.Sum(nil), want) {
		return ErrSignatureMismatch
	}
	return nil
}

// Sign returns the X-Signature value a generic-hmac Provider sends for body: "<hashName>=<hex hmac>".
func Sign(body []byte, hashName string, token []byte) (string, error) {
	newHash, ok := signatureHashes[hashName]
	if !ok {
		return "", fmt.Errorf("%w: %q", ErrSignatureHash, hashName)
	}
	mac := hmac.New(newHash, token)
	mac.Write(body)
	return hashName + "=" + hex.EncodeToString(mac.Sum(nil)), nil
}
