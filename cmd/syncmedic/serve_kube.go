package main

import (
	"context"
	"fmt"
	"strings"

	"github.com/spf13/pflag"
	"k8s.io/client-go/dynamic"

	"github.com/syncmedic/syncmedic"
	"github.com/syncmedic/syncmedic/kube"
)

// kubeOptions are the cluster checks' flags.
type kubeOptions struct {
	kinds   []string
	cluster string
	enabled bool
}

func init() {
	o := &kubeOptions{}
	registerServeComponent(serveComponent{
		name: "kube",
		flags: func(fs *pflag.FlagSet) {
			fs.BoolVar(&o.enabled, "kube-checks", true, "run the cluster checks (stuck terminating objects, webhook backends, Argo Workflows) when a cluster is configured")
			fs.StringSliceVar(&o.kinds, "kube-stuck-kinds", kube.DefaultStuckKinds, "resources (resource.group) checked for being stuck terminating")
			fs.StringVar(&o.cluster, "kube-cluster-name", "default", "name of the cluster in incident subjects (kube/<name>)")
		},
		start: func(ctx context.Context, d serveDeps) (serveParts, error) { return startKube(ctx, d, o) },
	})
}

func startKube(_ context.Context, d serveDeps, o *kubeOptions) (serveParts, error) {
	if d.Kube == nil || !o.enabled {
		return serveParts{}, nil
	}
	log := d.Log.With("component", "kube")
	scanner, err := kube.NewScanner(kube.ScannerOptions{Config: d.Kube, Cluster: o.cluster, Kinds: o.kinds, Thresholds: d.Thresholds.Kube, Log: log})
	if err != nil {
		return serveParts{}, fmt.Errorf("kube: %w", err)
	}
	dyn, err := dynamic.NewForConfig(d.Kube)
	if err != nil {
		return serveParts{}, fmt.Errorf("kube: %w", err)
	}
	d.Triggers.Handle("kube/", scanner.Trigger)
	log.Info("kube: cluster checks", "subject", scanner.Subject(), "watched", strings.Join(scanner.Watched(), ","))
	return serveParts{
		Sources:   []syncmedic.Source{scanner},
		Remediers: syncmedic.Remediers{syncmedic.ActionForceFinalizerRemoval: kube.NewWorkflowRemedier(dyn)},
		Ready:     scanner.Ready,
	}, nil
}
