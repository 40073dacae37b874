package incident

import "regexp"

// ageRe matches an age as HumanDuration writes it ("8s", "2m30s", "3h", "1d2h"), as a whole word.
var ageRe = regexp.MustCompile(`\b\d+[dhms](?:\d+[hms])?\b`)

// sameSummary reports whether two summaries of a finding say the same thing once the ages in them are ignored:
// "has been Running for 8s" and "… for 17s" are the same news, and re-announcing them on every evaluation would
// flood the incident's thread.
func sameSummary(a, b string) bool {
	if a == b {
		return true
	}
	return ageRe.ReplaceAllString(a, "<age>") == ageRe.ReplaceAllString(b, "<age>")
}
