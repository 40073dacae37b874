// Package wfreal runs Argo Workflows' real workflow-controller (built by hack/workflows-tools.sh) against the test
// apiserver, one controller per test namespace (--namespaced), and plays the two parts of a workflow Pod the suite
// cannot run: the kubelet (testenv.Kubelet) and Argo Workflows' executor, argoexec, whose wait container reports a
// step's outputs (a WorkflowTaskResult) and whose artifact-gc Pod reports the deletions (a WorkflowArtifactGCTask's
// status). Everything else — the Workflow's status, its finalizers, node status compression, the artifact
// garbage-collection Pods and Tasks — is the controller's own.
package wfreal
