package snapshot

import "time"

// Newest returns the newest RFC3339 timestamp (creation, deletion, condition, operation, event times …) among the
// objects kept, ignoring any later than notAfter (a certificate's expiry says nothing about when the dump was taken);
// zero when there is none. A dump was taken at that instant or later.
func (s *Snapshot) Newest(notAfter time.Time) time.Time {
	var newest time.Time
	for _, o := range s.Objects {
		newestIn(o.Object, notAfter, &newest)
	}
	return newest
}

func newestIn(v interface{}, notAfter time.Time, newest *time.Time) {
	switch t := v.(type) {
	case map[string]interface{}:
		for _, x := range t {
			newestIn(x, notAfter, newest)
		}
	case []interface{}:
		for _, x := range t {
			newestIn(x, notAfter, newest)
		}
	case string:
		if !looksLikeTime(t) {
			return
		}
		if ts, err := time.Parse(time.RFC3339, t); err == nil && !ts.After(notAfter) && ts.After(*newest) {
			*newest = ts
		}
	}
}

// looksLikeTime is a cheap test before time.Parse: "2025-06-10T13:58:00Z" and its fractional and offset forms.
func looksLikeTime(s string) bool {
	return len(s) >= 20 && len(s) <= 35 && s[4] == '-' && s[7] == '-' && s[10] == 'T'
}
