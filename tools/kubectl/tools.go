//go:build tools

// Package tools pins kubectl v1.31.0 for hack/tools.sh: the install tests run the install pages' kubectl commands as
// written against the real node. A module of its own so adding it does not change the other tools' stamps.
package tools

import (
	_ "k8s.io/kubernetes/cmd/kubectl"
)
