// Package webhook posts each incident transition as JSON to an outgoing webhook, HMAC-signed with
// X-Signature: sha256=<hex> when a secret is set, so syncmedic can feed other systems.
package webhook
