package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/argoproj/argo-cd/v2/util/localconfig"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/util/homedir"

	"github.com/syncmedic/syncmedic/argocd"
)

// errNothingToScan is the usage error of a scan or fix given no source and finding none of the CLIs' own
// configurations either.
var errNothingToScan = errors.New("nothing to scan: give --snapshot PATH for a dump; for a live cluster, --kubeconfig or --context, or a kubeconfig in $KUBECONFIG or ~/.kube/config; for a live Argo CD, --argocd-server, --argocd-context or an `argocd login`")

// resolve decides which live parts run, the way kubectl and the argocd CLI find their configuration, before any
// source is built. The cluster part runs with --kubeconfig or --context; the Argo CD part with --argocd-server or
// --argocd-context. When the command was given no source at all (otherSource false: no --snapshot either), both
// CLIs' defaults are read: the kubeconfig's current context ($KUBECONFIG, else ~/.kube/config, else in-cluster) and
// the current context of `argocd login`; each part runs when its configuration exists, and the error is
// errNothingToScan when neither does. A dump alone never reads either configuration.
func (o *liveOptions) resolve(otherSource bool) error {
	if err := o.argocd.resolveLogin(); err != nil {
		return err
	}
	if otherSource || o.kubeconfig != "" || o.kubeContext != "" || o.argocd.enabled() {
		return nil
	}
	_, err := o.loadKubeConfig()
	switch {
	case err == nil:
		o.kubeDefault = true
	case !clientcmd.IsEmptyConfig(err):
		return err
	}
	path, err := localconfig.DefaultLocalConfigPath()
	if err != nil {
		return fmt.Errorf("finding the argocd login configuration: %w", err)
	}
	lc, err := readLoginConfig(path)
	if err != nil {
		return err
	}
	if lc != nil && lc.CurrentContext != "" {
		if err := o.argocd.fromLogin(path, lc, ""); err != nil {
			return fmt.Errorf("%w; with no source flag its current context is read: give --kubeconfig or --context for the cluster alone", err)
		}
	}
	if !o.kubeDefault && !o.argocd.enabled() {
		return errNothingToScan
	}
	return nil
}

// kubeEnabled reports whether the live cluster part runs (after resolve).
func (o *liveOptions) kubeEnabled() bool {
	return o.kubeconfig != "" || o.kubeContext != "" || o.kubeDefault
}

// kubeSource names where the cluster's configuration comes from, for errors: the flags given, else the defaults.
func (o *liveOptions) kubeSource() string {
	var parts []string
	if o.kubeconfig != "" {
		parts = append(parts, "--kubeconfig "+o.kubeconfig)
	} else if env := os.Getenv(clientcmd.RecommendedConfigPathEnvVar); env != "" {
		parts = append(parts, "$KUBECONFIG "+env)
	} else {
		parts = append(parts, "kubeconfig "+homeKubeconfig())
	}
	if o.kubeContext != "" {
		parts = append(parts, "--context "+o.kubeContext)
	}
	return strings.Join(parts, ", ")
}

// homeKubeconfig is ~/.kube/config, from $HOME as it is now.
func homeKubeconfig() string {
	return filepath.Join(homedir.HomeDir(), clientcmd.RecommendedHomeDir, clientcmd.RecommendedFileName)
}

// restConfig is loadKubeConfig with an error that names the flags or files to fix.
func (o *liveOptions) restConfig() (*rest.Config, error) {
	cfg, err := o.loadKubeConfig()
	if err != nil {
		return nil, fmt.Errorf("%s: %w", o.kubeSource(), err)
	}
	return cfg, nil
}

// loadKubeConfig loads the cluster's configuration with kubectl's rules: --kubeconfig alone when given, else the
// files of $KUBECONFIG (a list separated by the OS's path separator, merged), else ~/.kube/config, else the
// in-cluster service account; --context picks the context, else the current one. The error is clientcmd's, so
// resolve can tell an empty configuration (clientcmd.IsEmptyConfig) from a broken one.
func (o *liveOptions) loadKubeConfig() (*rest.Config, error) {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.MigrationRules = nil
	if os.Getenv(clientcmd.RecommendedConfigPathEnvVar) == "" {
		rules.Precedence = []string{homeKubeconfig()}
	}
	rules.ExplicitPath = o.kubeconfig
	overrides := &clientcmd.ConfigOverrides{CurrentContext: o.kubeContext}
	return clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, overrides).ClientConfig()
}

// readLoginConfig reads the argocd CLI's login configuration at path; nil when there is none.
func readLoginConfig(path string) (*localconfig.LocalConfig, error) {
	lc, err := localconfig.ReadLocalConfig(path)
	if err != nil {
		return nil, fmt.Errorf("argocd login configuration %s: %w (fix it with `argocd login`, or give --argocd-server)", path, err)
	}
	return lc, nil
}

// resolveLogin fills the Argo CD connection from the argocd CLI's login configuration: all of it from the context
// --argocd-context names, or, for --argocd-server given with neither --argocd-token-file nor $ARGOCD_AUTH_TOKEN, the
// token the configuration holds for that server (as `argocd --server` uses it), when it holds one.
func (o *argoCDFlags) resolveLogin() error {
	if o.loginContext == "" && (o.server == "" || o.tokenFile != "" || os.Getenv(argocd.EnvAuthToken) != "") {
		return nil
	}
	if o.loginContext != "" && o.server != "" {
		return errors.New("--argocd-context and --argocd-server exclude each other: the context names its server; give one of them")
	}
	path, err := localconfig.DefaultLocalConfigPath()
	if err != nil {
		return fmt.Errorf("finding the argocd login configuration: %w", err)
	}
	lc, err := readLoginConfig(path)
	if err != nil {
		return err
	}
	if o.loginContext != "" {
		if lc == nil {
			return fmt.Errorf("--argocd-context %s: there is no argocd login configuration at %s: run `argocd login` first, set $ARGOCD_CONFIG_DIR, or give --argocd-server", o.loginContext, path)
		}
		return o.fromLogin(path, lc, o.loginContext)
	}
	if lc == nil {
		return nil
	}
	for _, c := range lc.Contexts {
		if c.Server != o.server {
			continue
		}
		if u, err := lc.GetUser(c.User); err == nil && u.AuthToken != "" {
			o.token = u.AuthToken
			return nil
		}
	}
	return nil
}

// fromLogin takes server, token and TLS settings from context name of lc (its current context when name is
// empty). The TLS flags given on the command line (--argocd-insecure, --argocd-plaintext, --argocd-grpc-web,
// --argocd-ca-file, --argocd-token-file) still apply on top.
func (o *argoCDFlags) fromLogin(path string, lc *localconfig.LocalConfig, name string) error {
	c, err := lc.ResolveContext(name)
	if err != nil {
		return fmt.Errorf("argocd login configuration %s: %w (`argocd context` lists the contexts)", path, err)
	}
	where := fmt.Sprintf("argocd login context %q (%s)", c.Name, path)
	switch {
	case c.Server.Core:
		return fmt.Errorf("%s was made with `argocd login --core`: syncmedic reads Argo CD through argocd-server, give --argocd-server", where)
	case c.Server.ClientCertificateData != "":
		return fmt.Errorf("%s authenticates with a client certificate, which syncmedic does not send: give --argocd-server and --argocd-token-file", where)
	case c.Server.CACertificateAuthorityData != "":
		return fmt.Errorf("%s holds certificate-authority-data, which syncmedic does not read: give the CA as a file with --argocd-ca-file and --argocd-server", where)
	case c.User.AuthToken == "" && o.tokenFile == "":
		return fmt.Errorf("%s holds no token: run `argocd login %s` again, or give --argocd-token-file", where, c.Server.Server)
	}
	o.server = c.Server.Server
	o.token = c.User.AuthToken
	o.insecure = o.insecure || c.Server.Insecure
	o.plaintext = o.plaintext || c.Server.PlainText
	o.grpcWeb = o.grpcWeb || c.Server.GRPCWeb
	o.grpcWebRootPath = c.Server.GRPCWebRootPath
	return nil
}
