package flux

import (
	"testing"
	"time"

	helmv2 "github.com/fluxcd/helm-controller/api/v2"
	"github.com/fluxcd/pkg/apis/meta"
	"github.com/fluxcd/pkg/runtime/conditions"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The helpers in conditions.go stand in for fluxcd/pkg/runtime/conditions in the binary: they must answer exactly
// what that package answers for every combination of Ready, Stalled and Reconciling.
func TestConditionHelpersAnswerWhatFluxsConditionsPackageAnswers(t *testing.T) {
	at := metav1.NewTime(time.Date(2026, 11, 23, 3, 0, 0, 0, time.UTC))
	statuses := []metav1.ConditionStatus{"", metav1.ConditionTrue, metav1.ConditionFalse, metav1.ConditionUnknown}
	for _, ready := range statuses {
		for _, stalled := range statuses {
			for _, reconciling := range statuses {
				hr := &helmv2.HelmRelease{}
				add := func(typ string, st metav1.ConditionStatus) {
					if st != "" {
						hr.Status.Conditions = append(hr.Status.Conditions, metav1.Condition{Type: typ, Status: st,
							Reason: typ + "Reason", Message: typ + " is " + string(st), LastTransitionTime: at})
					}
				}
				add(meta.ReadyCondition, ready)
				add(meta.StalledCondition, stalled)
				add(meta.ReconcilingCondition, reconciling)
				name := "Ready=" + string(ready) + " Stalled=" + string(stalled) + " Reconciling=" + string(reconciling) + " reads the same"
				t.Run(name, func(t *testing.T) {
					require.Equal(t, conditions.IsReady(hr), isReady(hr), "IsReady")
					for _, typ := range []string{meta.ReadyCondition, meta.StalledCondition, meta.ReconcilingCondition} {
						require.Equal(t, conditions.Get(hr, typ), condition(hr, typ), "Get %s", typ)
						require.Equal(t, conditions.GetMessage(hr, typ), conditionMessage(hr, typ), "GetMessage %s", typ)
						require.Equal(t, conditions.GetLastTransitionTime(hr, typ), conditionTransition(hr, typ), "GetLastTransitionTime %s", typ)
					}
				})
			}
		}
	}
}

func TestConditionReturnsACopy(t *testing.T) {
	hr := &helmv2.HelmRelease{}
	hr.Status.Conditions = []metav1.Condition{{Type: meta.ReadyCondition, Status: metav1.ConditionFalse, Message: "before"}}
	c := condition(hr, meta.ReadyCondition)
	c.Message = "changed by the caller"
	require.Equal(t, "before", hr.Status.Conditions[0].Message, "like conditions.Get, the release is not changed through the result")
}
