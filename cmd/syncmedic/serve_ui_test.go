package main

import (
	"log/slog"
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
		{name: "a token file turns on the API and the page", opts: uiOptions{tokenFile: writeFile(t, "token", "s3cret\n")},
			wantPaths: []string{ui.IncidentsPath, ui.IncidentsPath + "/", ui.SilencesPath, ui.SilencesPath + "/", ui.PagePath, ui.ExtensionBundlePath, ui.ExtensionArchivePath}},
		{name: "an empty token file is refused", opts: uiOptions{tokenFile: writeFile(t, "empty", " \n")}, wantErr: "is empty"},
		{name: "a missing token file is refused", opts: uiOptions{tokenFile: "/nonexistent/token"}, wantErr: "--api-token-file"},
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
