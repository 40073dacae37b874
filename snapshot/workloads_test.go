package snapshot

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/syncmedic/syncmedic/flux"
)

// TestKustomizationWorkloadsAreKeptAndJudged: a dump keeps the workloads kustomize-controller applied (labelled with
// the Kustomization's name) and drops the others; a Kustomization whose health check is in progress is paired with
// the ones that are not ready, an inventory workload the dump lacks is "not found", and a spec.healthChecks workload
// the dump cannot vouch for makes the health evidence "not read".
func TestKustomizationWorkloadsAreKeptAndJudged(t *testing.T) {
	const kustomization = `apiVersion: kustomize.toolkit.fluxcd.io/v1
kind: Kustomization
metadata: {name: monitoring, namespace: flux-system}
spec:
  interval: 10m
  timeout: 5m
  sourceRef: {kind: GitRepository, name: flux-system}
%s
status:
  inventory:
    entries:
    - {id: monitoring_prometheus_apps_Deployment, v: v1}
    - {id: monitoring_alertmanager_apps_Deployment, v: v1}
    - {id: monitoring_grafana_apps_Deployment, v: v1}
    - {id: monitoring_settings__ConfigMap, v: v1}
  conditions:
  - {type: Ready, status: Unknown, reason: Progressing, message: Reconciliation in progress, lastTransitionTime: "2025-06-10T13:00:00Z"}
---
`
	const workloads = `apiVersion: apps/v1
kind: Deployment
metadata: {name: prometheus, namespace: monitoring, generation: 3, labels: {kustomize.toolkit.fluxcd.io/name: monitoring, kustomize.toolkit.fluxcd.io/namespace: flux-system}}
spec: {replicas: 2}
status: {observedGeneration: 3, replicas: 2, updatedReplicas: 2, availableReplicas: 0}
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: grafana, namespace: monitoring, generation: 1, labels: {kustomize.toolkit.fluxcd.io/name: monitoring, kustomize.toolkit.fluxcd.io/namespace: flux-system}}
spec: {replicas: 1}
status: {observedGeneration: 1, replicas: 1, availableReplicas: 1}
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: unrelated, namespace: monitoring, generation: 1}
spec: {replicas: 1}
`
	read := func(t *testing.T, docs string) (*Snapshot, Observations) {
		s := &Snapshot{KeepUsedOnly: true}
		s.init()
		s.Add("dump.yaml", []byte(docs))
		require.Empty(t, s.Problems)
		return s, s.Observe()
	}
	t.Run("the applied workloads are kept, the others dropped", func(t *testing.T) {
		s, _ := read(t, fmtK(kustomization, "")+workloads)
		var kept []string
		for _, u := range s.Objects {
			if u.GetKind() == "Deployment" {
				kept = append(kept, u.GetName())
			}
		}
		require.Equal(t, []string{"prometheus", "grafana"}, kept)
	})
	t.Run("the inventory's workloads are judged: not ready, not found, ready", func(t *testing.T) {
		_, o := read(t, fmtK(kustomization, "")+workloads)
		require.Len(t, o.Kustomizations, 1)
		k := o.Kustomizations[0]
		require.True(t, k.HealthKnown)
		require.Equal(t, []flux.HeldBy{
			{Ref: "Deployment/monitoring/prometheus", Status: "0 of 2 replicas available"},
			{Ref: "Deployment/monitoring/alertmanager", Status: "not found"},
		}, k.NotReady)
	})
	t.Run("a health check the dump cannot vouch for makes the evidence not read", func(t *testing.T) {
		_, o := read(t, fmtK(kustomization, "  healthChecks: [{apiVersion: apps/v1, kind: StatefulSet, name: db, namespace: monitoring}]")+workloads)
		require.False(t, o.Kustomizations[0].HealthKnown)
	})
	t.Run("a dump without Deployments claims none is missing", func(t *testing.T) {
		_, o := read(t, fmtK(kustomization, ""))
		require.False(t, o.Kustomizations[0].HealthKnown)
		require.Empty(t, o.Kustomizations[0].NotReady)
	})
}

func fmtK(k, healthChecks string) string {
	if healthChecks == "" {
		return strings.Replace(k, "%s\n", "", 1)
	}
	return strings.Replace(k, "%s", healthChecks, 1)
}
