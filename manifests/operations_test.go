package manifests

import (
	"testing"

	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

func TestBaseKeepsALeaderThroughDisruptionsAndTrustsArgoCDAsConfigured(t *testing.T) {
	objs := build(t, "base")
	var d appsv1.Deployment
	convert(t, find(t, objs, "Deployment", "syncmedic"), &d)
	pod := d.Spec.Template.Spec
	c := pod.Containers[0]

	t.Run("the PodDisruptionBudget keeps one of the two replicas through voluntary evictions", func(t *testing.T) {
		var pdb policyv1.PodDisruptionBudget
		convert(t, find(t, objs, "PodDisruptionBudget", "syncmedic"), &pdb)
		require.Equal(t, "syncmedic", pdb.Namespace)
		require.Equal(t, intstr.FromInt32(1), *pdb.Spec.MinAvailable)
		require.Less(t, pdb.Spec.MinAvailable.IntVal, *d.Spec.Replicas, "a budget of every replica would block every drain")
		require.Equal(t, d.Spec.Selector, pdb.Spec.Selector)
	})

	t.Run("the replicas prefer different nodes", func(t *testing.T) {
		require.NotNil(t, pod.Affinity)
		terms := pod.Affinity.PodAntiAffinity.PreferredDuringSchedulingIgnoredDuringExecution
		require.Len(t, terms, 1)
		require.Equal(t, "kubernetes.io/hostname", terms[0].PodAffinityTerm.TopologyKey)
		require.Equal(t, d.Spec.Selector, terms[0].PodAffinityTerm.LabelSelector)
		require.Empty(t, pod.Affinity.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution, "a one-node cluster still runs both")
	})

	t.Run("the argocd-server CA Secret is mounted when it exists and is optional otherwise", func(t *testing.T) {
		var ca *corev1.Volume
		for i := range pod.Volumes {
			if pod.Volumes[i].Name == "argocd-ca" {
				ca = &pod.Volumes[i]
			}
		}
		require.NotNil(t, ca)
		require.Equal(t, "syncmedic-argocd-ca", ca.Secret.SecretName)
		require.True(t, *ca.Secret.Optional)
		require.Contains(t, c.VolumeMounts, corev1.VolumeMount{Name: "argocd-ca", MountPath: "/etc/syncmedic/argocd-ca", ReadOnly: true})
	})

	// Each Argo CD connection setting, and Slack's, comes from an optional key of the syncmedic-settings ConfigMap, into the
	// environment variable of its flag (cmd/syncmedic/env.go: SYNCMEDIC_ and the flag name).
	settings := []struct {
		key, env string
	}{
		{"argocd-server", "SYNCMEDIC_ARGOCD_SERVER"},
		{"argocd-ca-file", "SYNCMEDIC_ARGOCD_CA_FILE"},
		{"argocd-insecure", "SYNCMEDIC_ARGOCD_INSECURE"},
		{"argocd-plaintext", "SYNCMEDIC_ARGOCD_PLAINTEXT"},
		{"argocd-grpc-web", "SYNCMEDIC_ARGOCD_GRPC_WEB"},
		{"slack-channel", "SYNCMEDIC_SLACK_CHANNEL"},
		{"slack-token-file", "SYNCMEDIC_SLACK_TOKEN_FILE"},
	}
	for _, s := range settings {
		t.Run("the settings key "+s.key+" sets "+s.env+" and may be left out", func(t *testing.T) {
			var env *corev1.EnvVar
			for i := range c.Env {
				if c.Env[i].Name == s.env {
					env = &c.Env[i]
				}
			}
			require.NotNil(t, env)
			ref := env.ValueFrom.ConfigMapKeyRef
			require.Equal(t, "syncmedic-settings", ref.Name)
			require.Equal(t, s.key, ref.Key)
			require.True(t, *ref.Optional)
		})
	}
}
