package fluxnc

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// NotificationAPIVersion is the notification.toolkit.fluxcd.io version of Provider and Alert used here.
const NotificationAPIVersion = "notification.toolkit.fluxcd.io/v1beta3"

// Forwarding names the objects ForwardHelmReleaseEvents created.
type Forwarding struct {
	Namespace, Secret, Provider, Alert string
}

// ForwardHelmReleaseEvents creates, in namespace, a Secret holding token (key `token`), a generic-hmac Provider
// posting to address, and an Alert sending every HelmRelease event of the namespace (eventSources HelmRelease `*`,
// severity info) to it — what a user writes to point Flux at syncmedic's receiver.
func ForwardHelmReleaseEvents(t testing.TB, c client.Client, namespace, address string, token []byte) Forwarding {
	t.Helper()
	ctx := context.Background()
	f := Forwarding{Namespace: namespace, Secret: "syncmedic-hmac", Provider: "syncmedic", Alert: "syncmedic-helmreleases"}
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: f.Secret, Namespace: namespace}, Data: map[string][]byte{"token": token}}
	if err := c.Create(ctx, secret); err != nil {
		t.Fatalf("fluxnc: creating Secret %s/%s: %v", namespace, f.Secret, err)
	}
	provider := &unstructured.Unstructured{Object: map[string]interface{}{
		"apiVersion": NotificationAPIVersion, "kind": "Provider",
		"metadata": map[string]interface{}{"name": f.Provider, "namespace": namespace},
		"spec": map[string]interface{}{
			"type": "generic-hmac", "address": address,
			"secretRef": map[string]interface{}{"name": f.Secret},
		},
	}}
	if err := c.Create(ctx, provider); err != nil {
		t.Fatalf("fluxnc: creating Provider %s/%s: %v", namespace, f.Provider, err)
	}
	alert := &unstructured.Unstructured{Object: map[string]interface{}{
		"apiVersion": NotificationAPIVersion, "kind": "Alert",
		"metadata": map[string]interface{}{"name": f.Alert, "namespace": namespace},
		"spec": map[string]interface{}{
			"providerRef":   map[string]interface{}{"name": f.Provider},
			"eventSeverity": "info",
			"eventSources":  []interface{}{map[string]interface{}{"kind": "HelmRelease", "name": "*"}},
		},
	}}
	if err := c.Create(ctx, alert); err != nil {
		t.Fatalf("fluxnc: creating Alert %s/%s: %v", namespace, f.Alert, err)
	}
	return f
}
