package main

import (
	"context"
	"fmt"

	"github.com/spf13/pflag"

	"github.com/syncmedic/syncmedic/internal/secretfile"
	"github.com/syncmedic/syncmedic/ui"
)

// uiOptions are the flags of the incident API and page.
type uiOptions struct {
	tokenFile string
}

func init() {
	o := &uiOptions{}
	registerServeComponent(serveComponent{
		name: "ui",
		flags: func(fs *pflag.FlagSet) {
			fs.StringVar(&o.tokenFile, "api-token-file", "", "file holding the bearer token of the incident API ("+ui.IncidentsPath+
				") and page ("+ui.PagePath+"); both are off without it. The Argo CD proxy extension sends it from argocd-secret. "+
				"The API is read-only unless the policy's fixBy, ackBy or silenceBy lets someone fix, acknowledge or silence")
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
	hs, err := ui.Handlers(ui.Options{Incidents: d.Incidents, TokenSource: func() []byte { return []byte(token.Value()) }, Log: log, Fix: d.Fix, MayFix: d.MayFix, Changes: d.Changes,
		Acknowledge: d.OnCall.Acknowledge, Silences: d.OnCall, Policy: d.Policy})
	if err != nil {
		return serveParts{}, err
	}
	return serveParts{Handlers: hs}, nil
}
