package flux

import (
	helmv2 "github.com/fluxcd/helm-controller/api/v2"
	"github.com/fluxcd/pkg/apis/meta"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The condition helpers of fluxcd/pkg/runtime/conditions, for a HelmRelease, with the same results (conditions_test.go
// compares them). That package imports gomega (its test matchers live beside the getters), which would put a test
// library and its dependencies into the syncmedic binary; apimachinery's FindStatusCondition reads the same
// []metav1.Condition.

// condition returns a copy of hr's condition of type t, or nil, as conditions.Get does.
func condition(hr *helmv2.HelmRelease, t string) *metav1.Condition {
	c := apimeta.FindStatusCondition(hr.Status.Conditions, t)
	if c == nil {
		return nil
	}
	cp := *c
	return &cp
}

// conditionMessage is conditions.GetMessage: the message of hr's condition of type t, "" without one.
func conditionMessage(hr *helmv2.HelmRelease, t string) string {
	if c := apimeta.FindStatusCondition(hr.Status.Conditions, t); c != nil {
		return c.Message
	}
	return ""
}

// conditionTransition is conditions.GetLastTransitionTime: when hr's condition of type t last changed, nil without one.
func conditionTransition(hr *helmv2.HelmRelease, t string) *metav1.Time {
	if c := condition(hr, t); c != nil {
		return &c.LastTransitionTime
	}
	return nil
}

// isReady is conditions.IsReady: Ready is True, and hr is neither stalled (Stalled True, Reconciling not True) nor
// reconciling (Reconciling True, Stalled not True).
func isReady(hr *helmv2.HelmRelease) bool {
	stalled := apimeta.IsStatusConditionTrue(hr.Status.Conditions, meta.StalledCondition)
	reconciling := apimeta.IsStatusConditionTrue(hr.Status.Conditions, meta.ReconcilingCondition)
	return !(stalled && !reconciling) && !(reconciling && !stalled) &&
		apimeta.IsStatusConditionTrue(hr.Status.Conditions, meta.ReadyCondition)
}
