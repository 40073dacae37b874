package argocd

import (
	"fmt"
	"strings"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/syncmedic/syncmedic"
)

// Call names an Argo CD API call, for error messages and the RBAC permission it needs.
type Call string

// The calls syncmedic makes.
const (
	CallWatch              Call = "Watch"
	CallList               Call = "List"
	CallGet                Call = "Get"
	CallResourceTree       Call = "ResourceTree"
	CallGetResource        Call = "GetResource"
	CallPatchResource      Call = "PatchResource"
	CallTerminateOperation Call = "TerminateOperation"
	CallSync               Call = "Sync"
	CallVersion            Call = "Version"
	CallSyncWindows        Call = "GetApplicationSyncWindows"
	CallListAppSets        Call = "ApplicationSetService.List"
	CallSettings           Call = "SettingsService.Get"
)

// Permission returns the Argo CD RBAC policy the call needs on the application, as written in argocd-rbac-cm.
func (c Call) Permission() string {
	switch c {
	case CallSync:
		return "applications, sync (Sync also needs applications, get; on Argo CD v3.2+ with application.sync.requireOverridePrivilegeForRevisionSync, a revision other than the targetRevision also needs applications, override)"
	case CallTerminateOperation:
		return "applications, sync"
	case CallPatchResource:
		return "applications, update (on Argo CD v3 the fine-grained form applications, update/<group>/<kind>/<namespace>/<name>, e.g. update/batch/Job/*)"
	case CallVersion, CallSettings:
		return "none (the Version and Settings APIs are public)"
	case CallListAppSets:
		return "applicationsets, get (argocd-server lists only the ApplicationSets the account may get)"
	}
	return "applications, get"
}

// ErrAnotherOperation is the message Argo CD returns when Sync finds an operation still set on the application.
const ErrAnotherOperation = "another operation is already in progress"

// Classify turns an Argo CD API error into what the caller needs to decide on a retry: PermissionDenied,
// Unauthenticated and InvalidArgument become syncmedic.Permanent with the RBAC permission that is missing, and so
// does a FailedPrecondition of Sync (auto-sync revision, deleting application, Replace=true not allowed, local
// manifests) other than "another operation is already in progress" and an unresolvable revision; Unavailable and
// the rest stay retryable. The app names the application ("namespace/name").
func Classify(call Call, app string, err error) error {
	if err == nil {
		return nil
	}
	st, ok := status.FromError(err)
	if !ok {
		return fmt.Errorf("argocd %s %s: %w", call, app, err)
	}
	switch st.Code() {
	case codes.PermissionDenied:
		if isSyncWindow(err) {
			// Not RBAC: a deny window (or an allow window that is closed) refuses manual syncs until it passes.
			return fmt.Errorf("argocd %s %s: a sync window of the application's project blocks manual syncs now; retried after the window: %w", call, app, err)
		}
		return syncmedic.Permanent(fmt.Errorf("argocd %s %s: permission denied: the Argo CD account needs the RBAC permission `%s` for this application's project (argocd-rbac-cm): %w", call, app, call.Permission(), err))
	case codes.Unauthenticated:
		return syncmedic.Permanent(fmt.Errorf("argocd %s %s: not authenticated: the token is missing, expired or revoked (give a valid account token with --argocd-token-file or ARGOCD_AUTH_TOKEN): %w", call, app, err))
	case codes.InvalidArgument:
		return syncmedic.Permanent(fmt.Errorf("argocd %s %s: invalid request: %w", call, app, err))
	case codes.FailedPrecondition:
		if isAutoSyncRevision(err) {
			return syncmedic.Permanent(fmt.Errorf("argocd %s %s: argocd-server refuses a revision other than the targetRevision "+
				"for an auto-synced application; the same request would be refused again: %w", call, app, err))
		}
		if strings.Contains(err.Error(), "application is deleting") {
			return syncmedic.Permanent(fmt.Errorf("argocd %s %s: the application is being deleted: %w", call, app, err))
		}
		if IsReplaceRefused(err) {
			return syncmedic.Permanent(fmt.Errorf("argocd %s %s: argocd-server refuses every Sync carrying Replace=true "+
				"(server.sync.replace.allowed: \"false\" in argocd-cmd-params-cm); sync by hand without Replace=true, or allow it: %w", call, app, err))
		}
		if call == CallSync && !IsAnotherOperation(err) && !isRevisionResolution(err) {
			return syncmedic.Permanent(fmt.Errorf("argocd %s %s: argocd-server refuses this Sync; the same request would be refused again: %w", call, app, err))
		}
	}
	return fmt.Errorf("argocd %s %s: %w", call, app, err)
}

// isSyncWindow reports whether err is Argo CD's refusal of a sync by a sync window ("blocked by sync window").
func isSyncWindow(err error) bool {
	return err != nil && strings.Contains(err.Error(), "sync window")
}

// isAutoSyncRevision reports whether err is argocd-server's FailedPrecondition for a Sync naming a revision other
// than an auto-synced application's targetRevision ("Cannot sync to X: auto-sync currently set to Y", "Cannot sync
// source R to X: auto-sync currently set to Y"; v2.14.21 and v3.6.1 server/application resolveSourceRevisions).
// It is permanent: the server answers the same until the request or the application changes. Other
// FailedPrecondition answers of Sync (a revision the repo-server could not resolve) stay retryable.
func isAutoSyncRevision(err error) bool {
	return status.Code(err) == codes.FailedPrecondition && strings.Contains(err.Error(), "auto-sync currently set to")
}

// ErrReplaceRefused is argocd-server's answer (FailedPrecondition, v3.0+) to a Sync carrying Replace=true when
// ARGOCD_SYNC_WITH_REPLACE_ALLOWED (server.sync.replace.allowed in argocd-cmd-params-cm) is false.
const ErrReplaceRefused = "sync with replace was disabled on the API Server level"

// IsReplaceRefused reports whether err is argocd-server's refusal of a Sync carrying Replace=true.
func IsReplaceRefused(err error) bool {
	return status.Code(err) == codes.FailedPrecondition && strings.Contains(err.Error(), ErrReplaceRefused)
}

// isRevisionResolution reports whether err is Sync's FailedPrecondition for a revision the repo-server could not
// resolve (server/application resolveSourceRevisions, "error resolving repo revision"): the repository may answer
// again, so it stays retryable, unlike the other FailedPrecondition answers of Sync.
func isRevisionResolution(err error) bool {
	msg := err.Error()
	return strings.Contains(msg, "error resolving repo revision") || strings.Contains(msg, "error getting repo")
}

// IsAnotherOperation reports whether err is Argo CD's "another operation is already in progress".
func IsAnotherOperation(err error) bool {
	return err != nil && strings.Contains(err.Error(), ErrAnotherOperation)
}

// IsNoOperation reports whether err is TerminateOperation's "No operation is in progress" (already terminated).
func IsNoOperation(err error) bool {
	return err != nil && strings.Contains(err.Error(), "No operation is in progress")
}

// IsNotFound reports whether err says the resource or application does not exist.
func IsNotFound(err error) bool {
	if err == nil {
		return false
	}
	if status.Code(err) == codes.NotFound {
		return true
	}
	msg := err.Error()
	return strings.Contains(msg, "not found")
}

// isPermission reports whether err (possibly wrapped) is a gRPC PermissionDenied or Unauthenticated.
func isPermission(err error) bool {
	c := status.Code(err)
	return c == codes.PermissionDenied || c == codes.Unauthenticated
}
