package policy

import "github.com/syncmedic/syncmedic"

// hookFinding is a stuck hook Job of application shop, as in package incident's tracker_test.go.
func hookFinding(ns, name string) syncmedic.Finding {
	f := syncmedic.NewFinding(syncmedic.RuleHookFinalizerStuck, syncmedic.ObjectRef{Tool: syncmedic.ToolArgoCD, Group: "batch", Version: "v1", Kind: "Job",
		Namespace: ns, Name: name, App: "shop", Project: "default"}, "hook Job "+name+" is stuck terminating")
	f.Evidence = []syncmedic.Evidence{{Field: "metadata.finalizers", Value: "argocd.argoproj.io/hook-finalizer"}}
	f.Remedy = syncmedic.Remedy{Action: syncmedic.ActionRemoveHookFinalizer, AutoSafe: true, Description: "remove the finalizer",
		Commands: []string{"kubectl -n " + ns + " patch job " + name + " --type json -p '[...]'"}}
	return f
}
