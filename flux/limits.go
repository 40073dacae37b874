package flux

import "time"

// Limits of the event receiver, in one place (as notification-controller's internal/server/limits.go).
const (
	// DefaultMaxBodyBytes is the largest event body accepted (1 MiB); a larger body is answered 413. Flux caps an
	// event message at 39,000 characters, so a real event is far below it.
	DefaultMaxBodyBytes int64 = 1 << 20

	// DefaultQueueSize is how many accepted events may wait for processing; when the queue is full the receiver
	// answers 429 with Retry-After instead of buffering without bound.
	DefaultQueueSize = 1024

	// DefaultMaxEventAge is how far a signed event's timestamp may be from now, before or after, for the event to be
	// accepted: notification-controller posts an event at once and retries for about a minute, so an older one is a
	// replay (or a clock out of step). Within it, an identical body is accepted once.
	DefaultMaxEventAge = 10 * time.Minute

	// MaxRememberedEvents bounds the digests of accepted bodies kept to refuse duplicates (32 bytes and a time
	// each, a few MiB at most); beyond it the oldest are forgotten first.
	MaxRememberedEvents = 65536

	// RetryAfterSeconds is the Retry-After value sent with 429 and 503.
	RetryAfterSeconds = "1"

	// ReadHeaderTimeout, ReadTimeout, WriteTimeout and IdleTimeout bound a slow or idle client; use them on the
	// http.Server that serves the receiver.
	ReadHeaderTimeout = 5 * time.Second
	ReadTimeout       = 15 * time.Second
	WriteTimeout      = 15 * time.Second
	IdleTimeout       = 60 * time.Second

	// SignatureHeader carries "<hash>=<hex hmac>" from a generic-hmac Provider.
	SignatureHeader = "X-Signature"

	// EventsPath is where the receiver is served.
	EventsPath = "/flux/events"
)
