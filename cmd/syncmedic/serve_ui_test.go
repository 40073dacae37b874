package main

import (
	"log/slog"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/syncmedic/syncmedic/incident"
	"github.com/syncmedic/syncmedic/ui"
)

func TestStartUI(t *testing.T) {
	deps := serveDeps{Log: slog.New(slog.DiscardHandler), Incidents: func() []incident.Incident { return nil }}
	for _, tc := range []struct {
		name      string
		opts      uiOptions
		wantPaths []string
		wantErr   string
	}{
		{name: "without a token file the API and the page are off", opts: uiOptions{}},
		{name: "a token file turns on the API and the page", opts: uiOptions{tokenFile: writeFile(t, "token", testToken("s3cret")+"\n")},
			wantPaths: []string{ui.IncidentsPath, ui.IncidentsPath + "/", ui.SilencesPath, ui.SilencesPath + "/", ui.PagePath, ui.ExtensionBundlePath, ui.ExtensionArchivePath}},
		{name: "an empty token file is refused", opts: uiOptions{tokenFile: writeFile(t, "empty", " \n")}, wantErr: "is empty"},
		{name: "a missing token file is refused", opts: uiOptions{tokenFile: "/nonexistent/token"}, wantErr: "--api-token-file"},
		{name: "a missing proxy token file is refused", opts: uiOptions{tokenFile: writeFile(t, "token", testToken("s3cret")), proxyTokenFile: "/nonexistent/proxy"},
			wantErr: "--proxy-token-file: stat /nonexistent/proxy: no such file or directory: write a random token into it"},
		{name: "a short token is refused", opts: uiOptions{tokenFile: writeFile(t, "short", "s3cret\n")}, wantErr: "API token file: the token is 6 characters, want at least 32"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			parts, err := startUI(deps, &tc.opts)
			if tc.wantErr != "" {
				require.ErrorContains(t, err, tc.wantErr)
				require.NotContains(t, err.Error(), "s3cret")
				return
			}
			require.NoError(t, err)
			require.ElementsMatch(t, tc.wantPaths, sortedKeys(parts.Handlers))
		})
	}
}

// proxyTokenOf is the proxy token a test gives serve and argocd-server next to apiToken.
func proxyTokenOf(apiToken string) string { return "proxy-" + apiToken }

// testToken is a bare API token of at least ui.MinTokenLength characters named after name; a colon (a subtest's
// "serve: …") would make the token file's line "<name>:<token>", so it becomes '-'.
func testToken(name string) string {
	return strings.ReplaceAll(name, ":", "-") + "-" + strings.Repeat("0", ui.MinTokenLength)
}
