package syncmedic

import (
	"fmt"
	"io"
	"time"
)

// OldDumpAge is how much older than the instant it is judged at a dump may be before the report says so: ages such as
// "540d" otherwise read like a bug.
const OldDumpAge = 24 * time.Hour

// OldDump says that a dump judged at the current time is old, and the --now that judges it as it was.
type OldDump struct {
	// Newest is the newest timestamp found in the dump: it was taken then or later.
	Newest time.Time `json:"newest"`
	// Now is the --now to give to judge the dump as it was: Newest rounded up to the next five minutes.
	Now time.Time `json:"now"`
	// Message says both in one sentence, as the table prints it.
	Message string `json:"message"`
}

// NewOldDump returns the notice for a dump whose newest timestamp is newest, judged at now; nil when newest is
// unknown (zero) or not more than OldDumpAge before now.
func NewOldDump(newest, now time.Time) *OldDump {
	if newest.IsZero() || now.Sub(newest) <= OldDumpAge {
		return nil
	}
	newest = newest.UTC()
	suggested := newest.Truncate(5 * time.Minute)
	if suggested.Before(newest) {
		suggested = suggested.Add(5 * time.Minute)
	}
	days := int(now.Sub(newest) / (24 * time.Hour))
	return &OldDump{
		Newest: newest,
		Now:    suggested,
		Message: fmt.Sprintf("The newest timestamp in this dump is %s (%d days ago): ages are judged at now; add --now %s to judge them as they were",
			newest.Format(time.RFC3339), days, suggested.Format(time.RFC3339)),
	}
}

func writeOldDump(w io.Writer, d *OldDump) error {
	if d == nil {
		return nil
	}
	_, err := fmt.Fprintf(w, "\n%s.\n", d.Message)
	return err
}
