//go:build tools

package tools

import _ "github.com/argoproj/argo-cd/v3/cmd"
