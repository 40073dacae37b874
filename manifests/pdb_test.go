package manifests

import (
	"testing"

	"github.com/stretchr/testify/require"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// TestThePodDisruptionBudgetsNeverBlockADrainOnAnUnreadyPod checks the base's and the chart's PodDisruptionBudget:
// a pod held unready by a configuration error must not keep a node from draining (with minAvailable: 1 and the
// default policy, an unready pod is evicted only while the budget is otherwise met).
func TestThePodDisruptionBudgetsNeverBlockADrainOnAnUnreadyPod(t *testing.T) {
	for name, objs := range map[string][]*unstructured.Unstructured{
		"kustomize base": build(t, "base"),
		"helm chart":     helmTemplate(t, "syncmedic", "syncmedic"),
	} {
		t.Run(name, func(t *testing.T) {
			var pdb policyv1.PodDisruptionBudget
			convert(t, find(t, objs, "PodDisruptionBudget", "syncmedic"), &pdb)
			require.NotNil(t, pdb.Spec.UnhealthyPodEvictionPolicy)
			require.Equal(t, policyv1.AlwaysAllow, *pdb.Spec.UnhealthyPodEvictionPolicy)
		})
	}
}
