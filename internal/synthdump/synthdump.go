// Package synthdump writes the synthetic `kubectl get -A -o yaml` Lists that snapshot's benchmarks read and
// bench/snapshotdump prints, so both measure the same dump.
package synthdump

import (
	"fmt"
	"io"
)

// Write writes a List of objects objects, used of every 5 of kinds a rule reads (a hook Job, a Service, a
// HelmRelease, an Application; 0 to 4) and the others of kinds no rule reads unless they are terminating
// (PersistentVolumeClaims always, then ConfigMaps, Pods or ReplicaSets in place of used ones).
func Write(w io.Writer, objects, used int) {
	fmt.Fprint(w, "apiVersion: v1\nkind: List\nitems:\n")
	for i := 0; i < objects; i++ {
		c := i % 5
		if c >= used && c != 4 {
			c = 5 + i%3 // a kind no rule reads in place of a used one
		}
		switch c {
		case 0:
			fmt.Fprintf(w, "- apiVersion: batch/v1\n  kind: Job\n  metadata: {name: job-%d, namespace: ns-%d, annotations: {argocd.argoproj.io/hook: PreSync}, labels: {app.kubernetes.io/instance: app-%d}}\n  status: {conditions: [{type: Complete, status: \"True\"}]}\n", i, i%100, i%100)
		case 1:
			fmt.Fprintf(w, "- apiVersion: v1\n  kind: Service\n  metadata: {name: svc-%d, namespace: ns-%d}\n", i, i%100)
		case 2:
			fmt.Fprintf(w, "- apiVersion: helm.toolkit.fluxcd.io/v2\n  kind: HelmRelease\n  metadata: {name: hr-%d, namespace: ns-%d, generation: 2}\n  status: {observedGeneration: 2, conditions: [{type: Ready, status: \"True\", reason: UpgradeSucceeded, message: ok, lastTransitionTime: \"2025-01-01T00:00:00Z\"}]}\n", i, i%100)
		case 3:
			fmt.Fprintf(w, "- apiVersion: argoproj.io/v1alpha1\n  kind: Application\n  metadata: {name: app-%d, namespace: argocd}\n  spec: {project: default, destination: {namespace: ns-%d}, source: {repoURL: r}}\n  status: {operationState: {phase: Succeeded, startedAt: \"2025-01-01T00:00:00Z\", operation: {sync: {revision: abc}}}}\n", i, i%100)
		case 4:
			fmt.Fprintf(w, "- apiVersion: v1\n  kind: PersistentVolumeClaim\n  metadata: {name: pvc-%d, namespace: ns-%d}\n", i, i%100)
		case 5:
			fmt.Fprintf(w, "- apiVersion: v1\n  kind: ConfigMap\n  metadata: {name: cm-%d, namespace: ns-%d, labels: {app: a-%d}}\n  data: {key: value-%d}\n", i, i%100, i%100, i)
		case 6:
			fmt.Fprintf(w, "- apiVersion: v1\n  kind: Pod\n  metadata: {name: pod-%d, namespace: ns-%d, labels: {app: a-%d}}\n  spec: {containers: [{name: c, image: \"nginx:1.27\"}]}\n  status: {phase: Running, conditions: [{type: Ready, status: \"True\", lastTransitionTime: \"2025-01-01T00:00:00Z\"}]}\n", i, i%100, i%100)
		default:
			fmt.Fprintf(w, "- apiVersion: apps/v1\n  kind: ReplicaSet\n  metadata: {name: rs-%d, namespace: ns-%d}\n  spec: {replicas: 1}\n", i, i%100)
		}
	}
}
