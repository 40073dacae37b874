package argocd

import (
	"context"
	"encoding/json"
	"errors"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/syncmedic/syncmedic/argocd/rules"
	"github.com/syncmedic/syncmedic/internal/argoapi/application"
	"github.com/syncmedic/syncmedic/internal/argoapi/v1alpha1"
)

// fetchHooks reads an application's live hook objects through the Argo CD API: ResourceTree, then GetResource for
// each tree node that may be a hook (named by the operation's sync result or message, marked as a hook in
// status.resources, or a top-level node that is not one of the application's managed resources). It returns the objects that carry a hook annotation.
func fetchHooks(ctx context.Context, c ApplicationClient, app *v1alpha1.Application) ([]*unstructured.Unstructured, error) {
	name, ns, proj := app.Name, app.Namespace, app.Spec.Project
	tree, err := c.ResourceTree(ctx, &application.ResourcesQuery{ApplicationName: &name, AppNamespace: &ns, Project: &proj})
	if err != nil {
		return nil, Classify(CallResourceTree, appKey(app), err)
	}
	var hooks []*unstructured.Unstructured
	for _, n := range rules.HookCandidates(app, tree) {
		rn, rns, v, g, k := n.Name, n.Namespace, n.Version, n.Group, n.Kind
		res, err := c.GetResource(ctx, &application.ApplicationResourceRequest{
			Name: &name, AppNamespace: &ns, Project: &proj, ResourceName: &rn, Namespace: &rns, Version: &v, Group: &g, Kind: &k,
		})
		if err != nil {
			if IsNotFound(err) {
				continue // gone between the tree and the read: absent
			}
			return nil, Classify(CallGetResource, appKey(app), err)
		}
		u := &unstructured.Unstructured{}
		if err := json.Unmarshal([]byte(res.GetManifest()), &u.Object); err != nil {
			return nil, errors.New("argocd GetResource " + appKey(app) + ": unreadable manifest: " + err.Error())
		}
		if rules.IsHook(u) {
			hooks = append(hooks, u)
		}
	}
	return hooks, nil
}

func appKey(app *v1alpha1.Application) string { return app.Namespace + "/" + app.Name }
