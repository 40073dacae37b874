package kube

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

func TestNextThreshold(t *testing.T) {
	now := time.Date(2026, 3, 10, 12, 0, 0, 0, time.UTC)
	th := Thresholds{Terminating: 2 * time.Minute, WebhookBackend: time.Minute, ArtifactGC: 3 * time.Minute}
	obj := func(created time.Time, deleted *time.Time, finalizers ...string) *unstructured.Unstructured {
		u := &unstructured.Unstructured{Object: map[string]interface{}{}}
		u.SetCreationTimestamp(metav1.NewTime(created))
		if deleted != nil {
			d := metav1.NewTime(*deleted)
			u.SetDeletionTimestamp(&d)
		}
		u.SetFinalizers(finalizers)
		return u
	}
	ago := func(d time.Duration) *time.Time { t := now.Add(-d); return &t }
	tests := []struct {
		name string
		inv  Inventory
		want time.Time
	}{
		{name: "an object deleted 30s ago with a finalizer is re-checked when the terminating threshold passes",
			inv: Inventory{Objects: []*unstructured.Unstructured{obj(now.Add(-time.Hour), ago(30*time.Second), "x")}}, want: now.Add(90 * time.Second)},
		{name: "a Workflow deleted 150s ago is re-checked when the artifact-gc threshold passes",
			inv: Inventory{Workflows: []*unstructured.Unstructured{obj(now.Add(-time.Hour), ago(150*time.Second), ArtifactGCFinalizer)}}, want: now.Add(30 * time.Second)},
		{name: "a webhook configuration created 20s ago is re-checked when its grace period ends",
			inv: Inventory{WebhookConfigurations: []*unstructured.Unstructured{obj(now.Add(-20*time.Second), nil)}}, want: now.Add(40 * time.Second)},
		{name: "an object deleted without finalizers arms no timer",
			inv: Inventory{Objects: []*unstructured.Unstructured{obj(now.Add(-time.Hour), ago(30*time.Second))}}},
		{name: "objects past every threshold arm no timer",
			inv: Inventory{Objects: []*unstructured.Unstructured{obj(now.Add(-time.Hour), ago(time.Hour), "x")}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			require.True(t, tt.want.Equal(NextThreshold(tt.inv, now, th)), "want %s, got %s", tt.want, NextThreshold(tt.inv, now, th))
		})
	}
}
