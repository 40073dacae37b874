//go:build tools

// Package tools pins Argo Workflows v3.5.10's workflow-controller (the last release before the fix of #13499), which
// hack/workflows-tools.sh builds into bin/ for the real-controller tests.
package tools

import _ "github.com/argoproj/argo-workflows/v3/cmd/workflow-controller"
