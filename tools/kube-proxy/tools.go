//go:build tools

// Package tools pins the real node's kube-proxy for hack/tools.sh; a module of its own so adding it does not change
// the stamps of the kubelet and kube-scheduler (tools/kubelet) or of kube-apiserver and kube-controller-manager.
package tools

import (
	_ "k8s.io/kubernetes/cmd/kube-proxy"
)
