package syncmedic

// ObjectKey names the object a rate limit applies to: the tool instance and the object reference.
func ObjectKey(o ObjectRef) string { return o.Tool + "/" + o.Instance + "/" + o.String() }

// ApplicationKey names the Argo CD application that manages o the way ObjectKey names the Application itself, so a
// remedy found on one of its hooks and one found on the Application count together; "" when o names no application.
func ApplicationKey(o ObjectRef) string {
	if o.App == "" {
		return ""
	}
	return ObjectKey(ObjectRef{Tool: o.Tool, Instance: o.Instance, Group: "argoproj.io", Kind: "Application",
		Namespace: o.AppNamespace, Name: o.App})
}

// ActsOnApplication reports whether the remedy acts on the Argo CD application rather than on the finding's object:
// it terminates the application's operation, or starts a new sync (a finalizer removal that then syncs). Such a
// remedy repeats on every hook of the application, whatever the hook is called — gitops-engine names a generateName
// hook `<prefix><rev7>-<phase>-<startedAt>`, a new name for every operation — so it is limited by the application.
func (r Remedy) ActsOnApplication() bool {
	switch r.Action {
	case ActionTerminateAndResync, ActionTerminateOperation, ActionResyncOrphaned:
		return true
	}
	return r.RerunsHooks
}

// RemedyKey names what the remedy of f acts on, for the rate limit and for "not repeated": the Argo CD application
// for a remedy that acts on it (ActsOnApplication), the finding's object otherwise.
func RemedyKey(f Finding) string {
	if f.Remedy.ActsOnApplication() {
		if k := ApplicationKey(f.Object); k != "" {
			return k
		}
	}
	return ObjectKey(f.Object)
}
