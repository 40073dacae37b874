package flux

import (
	"fmt"
	"strconv"
	"strings"
)

// controllerAdvisories returns the version notes for a helm-controller version ("v0.36.2"); none when unknown.
func controllerAdvisories(v string) []string {
	major, minor, ok := parseMinor(v)
	if !ok {
		return nil
	}
	if major == 0 && minor < 37 {
		return []string{fmt.Sprintf("helm-controller %s predates v0.37.0 (Flux 2.2.0), which introduced the v2beta2 status (status.history, new Ready messages); upgrade Flux, then reconcile with --force (helm-controller #850, #855; flux2 #4524).", v)}
	}
	return []string{fmt.Sprintf("helm-controller %s writes the v2beta2+ status; this object's status predates it and was not rewritten (helm-controller #946, #1101).", v)}
}

func parseMinor(v string) (major, minor int, ok bool) {
	v = strings.TrimPrefix(strings.TrimSpace(v), "v")
	parts := strings.SplitN(v, ".", 3)
	if len(parts) < 2 {
		return 0, 0, false
	}
	var err1, err2 error
	major, err1 = strconv.Atoi(parts[0])
	minor, err2 = strconv.Atoi(parts[1])
	return major, minor, err1 == nil && err2 == nil
}
