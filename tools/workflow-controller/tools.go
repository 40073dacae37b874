//go:build tools

// Package tools pins Argo Workflows' workflow-controller, which hack/workflows-tools.sh builds into bin/ for the
// real-controller tests (its own Kubernetes libraries, so it cannot live in the main module).
package tools

import _ "github.com/argoproj/argo-workflows/v3/cmd/workflow-controller"
