//go:build tools

// Package tools pins the real node's Kubernetes binaries (kubelet, kube-scheduler) for hack/tools.sh; a module of
// its own so adding them does not change the stamps of kube-apiserver and kube-controller-manager.
package tools

import (
	_ "k8s.io/kubernetes/cmd/kube-scheduler"
	_ "k8s.io/kubernetes/cmd/kubelet"
)
