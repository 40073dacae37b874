package flux_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/syncmedic/syncmedic"
	"github.com/syncmedic/syncmedic/internal/conformance"
	"github.com/syncmedic/syncmedic/internal/testenv"
	"github.com/syncmedic/syncmedic/internal/testenv/fluxreal"
)

// A HelmRelease deleted while helm-controller is not running stays deleting on finalizers.fluxcd.io (helm-controller
// #554). syncmedic announces flux/helmrelease-deletion-stuck saying no controller handles it; once helm-controller
// runs again it uninstalls the release, removes its finalizer, and the incident resolves. It runs on its own
// apiserver: stopping the shared helm-controller would stall every other test.
func TestReleaseDeletingWithoutControllerIsAnnouncedAndResolvesWhenItRuns(t *testing.T) {
	env := testenv.KubePrivate(t)
	t.Parallel()
	row := &conformance.Row{Version: helmV1, Scenario: "HelmRelease deleting while helm-controller is not running"}
	defer record(t, row)
	stack, ns, repo := setupPrivate(t, env, fluxreal.Options{Helm: fluxreal.HelmControllerV1})

	hr := stack.ScenarioStuckDeleting(t, ns, repo, "orphan")
	row.Controller = fmt.Sprintf("helm-controller stopped, release deleted: deletionTimestamp set, finalizers %v stay", hr.Finalizers)
	row.Syncmedic = "no finding"
	d := startServe(t, stack, ns, autoPolicy, "--release-deletion-threshold", "2s")

	root := announcedOnce(t, d.slack, syncmedic.RuleReleaseDeletionStuck, "orphan", 60*time.Second, "flux/helmrelease-deletion-stuck announced")
	require.Contains(t, root.Text, "no helm-controller has updated it since it was deleted")
	row.Syncmedic = "flux/helmrelease-deletion-stuck announced (no helm-controller handles it; notify only, no automatic remedy)"

	require.NoError(t, stack.StartHelmController(fluxreal.HelmControllerV1))
	require.Eventually(t, func() bool {
		_, err := stack.Env.Dynamic.Resource(helmReleaseGVR).Namespace(ns).Get(context.Background(), "orphan", getOptions)
		return apierrors.IsNotFound(err)
	}, 90*time.Second, 200*time.Millisecond, "helm-controller, running again, uninstalls the release and removes its finalizer")
	require.Eventually(t, func() bool {
		for _, p := range d.slack.thread(root.TS) {
			if strings.Contains(strings.ToLower(p.Text), "resolved") {
				return true
			}
		}
		return false
	}, 60*time.Second, 200*time.Millisecond, "the incident resolves once the release is gone")
	row.Controller += "; helm-controller started again: uninstalled, finalizer removed, release gone"
	row.Syncmedic += "; resolved when the release was gone"
}
