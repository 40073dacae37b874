package incident

import "errors"

// The errors of the tracker's on-call verbs (Acknowledge, Silence, CreateSilence, ExpireSilence). Match them with
// errors.Is; the messages wrapping them say what to do.
var (
	// ErrNotFound: no such incident or silence (do not retry).
	ErrNotFound = errors.New("not found")
	// ErrNotLeading: this replica does not lead, or has not loaded the stored incidents yet; retry (the leader
	// answers).
	ErrNotLeading = errors.New("this replica is not the leader or has not loaded the stored incidents yet: retry, the leader answers")
	// ErrResolved: the incident is resolved, there is nothing to take (do not retry).
	ErrResolved = errors.New("the incident is resolved")
	// ErrInvalid: the request is not valid; the wrapped message names the field (do not retry as is).
	ErrInvalid = errors.New("invalid")
	// ErrLimited: a bound is reached (a creator's silences, the room the silences may take); the wrapped message
	// says which and what to expire (do not retry as is).
	ErrLimited = errors.New("limit reached")
	// ErrUnavailable: the change could not be saved; retry.
	ErrUnavailable = errors.New("cannot save: retry")
)
