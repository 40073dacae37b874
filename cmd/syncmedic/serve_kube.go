package main

import (
	"context"
	"fmt"
	"strings"

	"github.com/spf13/pflag"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"

	"github.com/syncmedic/syncmedic"
	"github.com/syncmedic/syncmedic/kube"
)

// kubeOptions are the cluster checks' flags.
type kubeOptions struct {
	kinds   []string
	cluster string
	enabled bool
	// fs is serve's flag set, where the Argo CD component's flags are read (argoCDRulesRun).
	fs *pflag.FlagSet
}

func init() {
	o := &kubeOptions{}
	registerServeComponent(serveComponent{
		name: "kube",
		flags: func(fs *pflag.FlagSet) {
			o.fs = fs
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
	argoRun, err := argoCDRulesRun(o.fs)
	if err != nil {
		return serveParts{}, err
	}
	dyn, err := dynamic.NewForConfig(d.Kube)
	if err != nil {
		return serveParts{}, fmt.Errorf("kube: %w", err)
	}
	// The scanner learns which kinds the cluster serves when it is built: build it once the apiserver answers, in
	// the background, so an unreachable apiserver delays the checks and nothing else.
	checks := &lateSource[*kube.Scanner]{peer: "the apiserver", log: log, build: func(context.Context) (*kube.Scanner, error) {
		dc, err := discovery.NewDiscoveryClientForConfig(d.Kube)
		if err != nil {
			return nil, err
		}
		if _, err := dc.ServerVersion(); err != nil {
			return nil, err
		}
		scanner, err := kube.NewScanner(kube.ScannerOptions{Config: d.Kube, Cluster: o.cluster, Kinds: o.kinds, Thresholds: d.Thresholds.Kube, Log: log,
			ArgoCDRulesRun: argoRun})
		if err != nil {
			return nil, err
		}
		log.Info("kube: cluster checks", "subject", scanner.Subject(), "watched", strings.Join(scanner.Watched(), ","))
		return scanner, nil
	}}
	d.Triggers.Handle("kube/", func(subject string) {
		if s, ok := checks.Source(); ok {
			s.Trigger(subject)
		}
	})
	return serveParts{
		Sources:   []syncmedic.Source{checks},
		Remediers: syncmedic.Remediers{syncmedic.ActionForceFinalizerRemoval: kube.NewWorkflowRemedier(dyn)},
		Ready:     func() error { return checks.Ready(func(s *kube.Scanner) error { return s.Ready() }) },
	}, nil
}

// argoCDRulesRun reports whether serve's Argo CD component judges every Argo CD hook and Application of the cluster
// (argoCDFlags.judgesAllHooks), reading its flags from serve's flag set; false without one (tests that build the
// component by hand).
func argoCDRulesRun(fs *pflag.FlagSet) (bool, error) {
	if fs == nil || fs.Lookup("argocd-server") == nil {
		return false, nil
	}
	a := &argoCDServeOptions{fs: fs}
	if err := a.read(); err != nil {
		return false, err
	}
	return a.judgesAllHooks(), nil
}
