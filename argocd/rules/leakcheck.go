package rules

import "fmt"

// HookLeakCheck says when a Watcher takes its one look, per finished operation that ran hooks, at a healthy
// application's live hooks for one left holding argocd.argoproj.io/hook-finalizer. The look costs one ResourceTree
// (plus a GetResource per hook still there) for every such operation, so it is worth it only where the server can
// leak the finalizer.
type HookLeakCheck string

const (
	// HookLeakAuto looks only when the Argo CD server can put the finalizer on hooks: v2.14.3 and v3.x or later
	// (DESIGN.md, verified history), and when its version is unknown. Other 2.x servers never add it; an orphan a
	// past v2.14.3 left is still reported once it is deleted (the operation waiting on it becomes suspicious, and
	// the kube scanner reports it stuck terminating).
	HookLeakAuto HookLeakCheck = "auto"
	// HookLeakAlways looks whatever the server version.
	HookLeakAlways HookLeakCheck = "always"
	// HookLeakNever never looks at healthy applications.
	HookLeakNever HookLeakCheck = "never"
)

// ParseHookLeakCheck reads "auto", "always" or "never" ("" is auto).
func ParseHookLeakCheck(s string) (HookLeakCheck, error) {
	switch c := HookLeakCheck(s); c {
	case "":
		return HookLeakAuto, nil
	case HookLeakAuto, HookLeakAlways, HookLeakNever:
		return c, nil
	}
	return "", fmt.Errorf("hook leak check %q: want auto, always or never", s)
}

// Enabled reports whether the check applies to a server of this version.
func (c HookLeakCheck) Enabled(serverVersion string) bool {
	switch c {
	case HookLeakAlways:
		return true
	case HookLeakNever:
		return false
	}
	return canLeakHookFinalizer(serverVersion)
}

// canLeakHookFinalizer reports whether an Argo CD server of this version may add argocd.argoproj.io/hook-finalizer
// to hooks, and so leave it behind: v2.14.3 (by accident, argo-cd #21901) and every release from v3.0.0 (by design).
// An empty or unparsable version counts as able to, to be safe.
func canLeakHookFinalizer(serverVersion string) bool {
	v, ok := ParseVersion(serverVersion)
	if !ok {
		return true
	}
	return v.Major >= 3 || v == Version{2, 14, 3}
}
