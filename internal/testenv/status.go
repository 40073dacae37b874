package testenv

import (
	"context"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"
)

// writeStatus writes obj's status through the status subresource when the CRD has one, else with an update.
func writeStatus(ctx context.Context, ri dynamic.ResourceInterface, obj *unstructured.Unstructured) (*unstructured.Unstructured, error) {
	// hand-written state: writeStatus, the helper; callers say which status and why.
	got, err := ri.UpdateStatus(ctx, obj, metav1.UpdateOptions{})
	if apierrors.IsNotFound(err) {
		// hand-written state: writeStatus on a CRD without a status subresource; callers say why.
		return ri.Update(ctx, obj, metav1.UpdateOptions{})
	}
	return got, err
}
