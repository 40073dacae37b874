package main

import (
	"context"
	"fmt"
	"strconv"

	"github.com/spf13/pflag"

	"github.com/syncmedic/syncmedic/internal/secretfile"
	"github.com/syncmedic/syncmedic/ui"
)

// uiOptions are the flags of the incident API and page.
type uiOptions struct {
	tokenFile      string
	proxyTokenFile string
}

func init() {
	o := &uiOptions{}
	registerServeComponent(serveComponent{
		name: "ui",
		flags: func(fs *pflag.FlagSet) {
			fs.StringVar(&o.tokenFile, "api-token-file", "", "file holding the bearer token of the incident API ("+ui.IncidentsPath+
				") and page ("+ui.PagePath+"); both are off without it. One token, or one line <name>:<token> per person (policy "+
				"entries token:<name>); each at least "+strconv.Itoa(ui.MinTokenLength)+" characters. "+
				"The API is read-only unless the policy's fixBy, ackBy or silenceBy lets someone fix, acknowledge or silence")
			fs.StringVar(&o.proxyTokenFile, "proxy-token-file", "", "file holding the bearer token Argo CD's proxy extension sends from "+
				"argocd-secret (at least "+strconv.Itoa(ui.MinTokenLength)+" characters, not an API token): only requests with it may "+
				"name an Argo CD user and application (Argocd-* headers); without it the extension cannot call the API")
		},
		start: func(_ context.Context, d serveDeps) (serveParts, error) { return startUI(d, o) },
	})
}

func startUI(d serveDeps, o *uiOptions) (serveParts, error) {
	log := d.Log.With("component", "ui")
	if o.tokenFile == "" {
		log.Info("no --api-token-file: the incident API and page are off")
		return serveParts{}, nil
	}
	// Re-read when the file changes: a rotated Secret takes effect without a restart.
	token, err := secretfile.Open("--api-token-file", o.tokenFile)
	if err != nil {
		return serveParts{}, fmt.Errorf("%w: write a random token into it (openssl rand -hex 32)", err)
	}
	uo := ui.Options{Incidents: d.Incidents, TokenSource: func() []byte { return []byte(token.Value()) }, Log: log, Fix: d.Fix, MayFix: d.MayFix, Changes: d.Changes,
		Acknowledge: d.OnCall.Acknowledge, Silences: d.OnCall, Policy: d.Policy}
	if o.proxyTokenFile != "" {
		proxy, err := secretfile.Open("--proxy-token-file", o.proxyTokenFile)
		if err != nil {
			return serveParts{}, fmt.Errorf("%w: write a random token into it (openssl rand -hex 32) and the same into argocd-secret (docs/install-kustomize.md, \"Seeing incidents\")", err)
		}
		uo.ProxyTokenSource = func() []byte { return []byte(proxy.Value()) }
	} else {
		log.Info("no --proxy-token-file: requests through Argo CD's proxy extension are refused (they carry Argocd-* headers)")
	}
	hs, err := ui.Handlers(uo)
	if err != nil {
		return serveParts{}, err
	}
	return serveParts{Handlers: hs}, nil
}
