package kube

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// TestExplainFinalizer: Argo CD's Application finalizers are explained with or without the suffix Argo CD writes;
// an unknown finalizer names the domain whose controller must remove it.
func TestExplainFinalizer(t *testing.T) {
	tests := []struct {
		name, want string
		known      bool
	}{
		{"pre-delete-finalizer.argocd.argoproj.io", "Argo CD pre-delete hook finalizer", true},
		{"pre-delete-finalizer.argocd.argoproj.io/cleanup", "Argo CD pre-delete hook finalizer", true},
		{"resources-finalizer.argocd.argoproj.io/foreground", "Argo CD cascade-delete finalizer", true},
		{"post-delete-finalizer.argocd.argoproj.io/cleanup", "Argo CD post-delete hook finalizer", true},
		{"argocd.argoproj.io/hook-finalizer", "Argo CD hook finalizer", true},
		{"kubernetes/x", "Unknown finalizer: the controller that added it (domain kubernetes)", false},
		{"example.com/cleanup", "Unknown finalizer: the controller that added it (domain example.com)", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, known := ExplainFinalizer(tt.name)
			require.Equal(t, tt.known, known)
			require.Contains(t, got, tt.want)
		})
	}
}
