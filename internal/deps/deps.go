// Package deps pins imports while the module is being assembled.
package deps

import (
	_ "github.com/fluxcd/pkg/apis/event/v1beta1"
	_ "github.com/fluxcd/pkg/runtime/events"
	_ "github.com/prometheus/client_golang/prometheus"
	_ "github.com/slack-go/slack"
	_ "github.com/slack-go/slack/slacktest"
	_ "github.com/spf13/cobra"
	_ "helm.sh/helm/v3/pkg/action"
	_ "k8s.io/client-go/tools/leaderelection"
	_ "sigs.k8s.io/kustomize/api/krusty"
)
