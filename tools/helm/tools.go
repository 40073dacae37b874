//go:build tools

// Package tools pins the helm CLI that hack/helm-tools.sh builds into bin/helm for the chart tests.
package tools

import _ "helm.sh/helm/v3/cmd/helm"
