// Package remedy owns every action syncmedic takes through Argo CD's API: PatchResource of a hook's finalizer,
// TerminateOperation, Sync and the resyncs, hard refresh, with the guards they run first (newer operations, sync
// windows, the override permission, lost replies) and the RBAC permissions they need. It uses the client of
// package argocd and the findings of argocd/rules; neither may import it.
package remedy
