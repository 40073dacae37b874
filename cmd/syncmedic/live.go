package main

import (
	"context"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/syncmedic/syncmedic"
	"github.com/syncmedic/syncmedic/argocd"
	"github.com/syncmedic/syncmedic/argocd/rules"
	"github.com/syncmedic/syncmedic/snapshot"
)

// liveOptions are the flags that point scan, fix and serve at a live Argo CD and cluster.
type liveOptions struct {
	// kubeconfig and kubeContext (--kubeconfig, --context) choose the cluster as kubectl does (live_config.go).
	kubeconfig, kubeContext string
	// kubeDefault turns the cluster part on with no flag: scan and fix were given no source at all, so they read the
	// cluster the kubeconfig's current context names, as kubectl does.
	kubeDefault bool
	argocd      argoCDFlags
}

// argoCDFlags are the Argo CD connection and scope flags shared by scan, fix and serve.
type argoCDFlags struct {
	server, tokenFile             string
	plaintext, insecure, grpcWeb  bool
	projects                      []string
	selector, appNamespace, uiURL string
	// caFile is the PEM file of the CA that signs argocd-server's certificate (scan, fix and serve alike).
	caFile string
	// loginContext (--argocd-context) names a context of the argocd CLI's login configuration; token and
	// grpcWebRootPath come from that configuration (resolveLogin, fromLogin), never from a flag.
	loginContext, token, grpcWebRootPath string
}

func addArgoCDFlags(f *pflag.FlagSet, o *argoCDFlags) {
	f.StringVar(&o.server, "argocd-server", "", "argocd-server gRPC address host:port (enables the Argo CD part)")
	f.StringVar(&o.tokenFile, "argocd-token-file", "", "file holding the Argo CD API token (default: the ARGOCD_AUTH_TOKEN variable)")
	f.BoolVar(&o.plaintext, "argocd-plaintext", false, "connect to argocd-server without TLS")
	f.BoolVar(&o.insecure, "argocd-insecure", false, "skip verifying argocd-server's TLS certificate")
	f.StringVar(&o.caFile, "argocd-ca-file", "", "PEM file of the CA that signs argocd-server's certificate (its default certificate is self-signed: give that certificate itself)")
	f.BoolVar(&o.grpcWeb, "argocd-grpc-web", false, "tunnel gRPC over HTTP/1.1 (for ingresses without HTTP/2)")
	f.StringSliceVar(&o.projects, "argocd-project", nil, "only applications of these Argo CD projects (repeatable)")
	f.StringVar(&o.selector, "argocd-selector", "", "only applications matching this label selector")
	f.StringVar(&o.appNamespace, "argocd-app-namespace", "", "only applications in this namespace (apps in any namespace)")
	f.StringVar(&o.uiURL, "argocd-url", "", "Argo CD UI base URL, for links in findings (e.g. https://argocd.example.com)")
}

func (o argoCDFlags) enabled() bool { return o.server != "" }

// judgesAllHooks reports whether the argocd rules judge every Argo CD hook and Application of the cluster: the Argo CD
// part runs and watches every application (no project, selector or namespace filter), so kube/stuck-terminating
// leaves Argo CD's own finalizers to those rules (kube.Inventory.ArgoCDRulesRun). A filtered watch leaves them to
// kube/stuck-terminating, since no argocd rule sees the hooks of the applications it leaves out.
func (o argoCDFlags) judgesAllHooks() bool {
	return o.enabled() && len(o.projects) == 0 && o.selector == "" && o.appNamespace == ""
}

func (o argoCDFlags) clientOptions() argocd.ClientOptions {
	return argocd.ClientOptions{ServerAddr: o.server, TokenFile: o.tokenFile, Token: o.token, PlainText: o.plaintext, Insecure: o.insecure, GRPCWeb: o.grpcWeb, GRPCWebRootPath: o.grpcWebRootPath, CAFile: o.caFile}
}

func (o argoCDFlags) scanOptions(c argocd.Client, th rules.Thresholds) argocd.ScanOptions {
	return argocd.ScanOptions{Client: c, Projects: o.projects, Selector: o.selector, AppNamespace: o.appNamespace, UIURL: o.uiURL, Thresholds: th}
}

func addLiveFlags(cmd *cobra.Command, o *liveOptions) {
	cmd.Flags().StringVar(&o.kubeconfig, "kubeconfig", "", "kubeconfig of the cluster to scan live (enables the cluster part; default: $KUBECONFIG, else ~/.kube/config, else in-cluster, when --context is given or no source at all)")
	cmd.Flags().StringVar(&o.kubeContext, "context", "", "kubeconfig context of the cluster to scan live (enables the cluster part; default: the current context)")
	addArgoCDFlags(cmd.Flags(), &o.argocd)
	cmd.Flags().StringVar(&o.argocd.loginContext, "argocd-context", "", "context of the argocd CLI's login configuration ($ARGOCD_CONFIG_DIR/config, else ~/.config/argocd/config) giving the server, token and TLS settings (enables the Argo CD part; the current context is used when no source at all is given)")
}

// liveSourceBuilders are the live finding sources other files add (one per tool), next to Argo CD's.
var liveSourceBuilders []func(o *liveOptions, th snapshot.Thresholds) ([]findingSource, error)

// liveSources returns the live finding sources the options enable.
func liveSources(o *liveOptions, th snapshot.Thresholds) ([]findingSource, error) {
	var out []findingSource
	if o.argocd.enabled() {
		if err := o.argocd.clientOptions().Validate(); err != nil {
			return nil, err
		}
		a := o.argocd
		read := new(string)
		out = append(out, findingSource{name: "argocd " + a.server, read: read, scan: func(ctx context.Context, now time.Time) ([]syncmedic.Finding, []string, error) {
			c, err := argocd.Dial(a.clientOptions())
			if err != nil {
				return nil, nil, err
			}
			defer c.Close()
			so := a.scanOptions(c, th.ArgoCD)
			so.Read = read
			return argocd.Scan(ctx, so, now)
		}})
	}
	for _, build := range liveSourceBuilders {
		s, err := build(o, th)
		if err != nil {
			return nil, err
		}
		out = append(out, s...)
	}
	return out, nil
}
