package manifests

import (
	"bytes"
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"

	"github.com/slack-go/slack"
	"github.com/stretchr/testify/require"
	"sigs.k8s.io/yaml"
)

// slackAppManifest is the part of Slack's app manifest format (api.slack.com/reference/manifests) syncmedic's
// manifests use; decoding is strict, so a misspelled field fails.
type slackAppManifest struct {
	DisplayInformation struct {
		Name            string `json:"name"`
		Description     string `json:"description"`
		BackgroundColor string `json:"background_color"`
	} `json:"display_information"`
	Features struct {
		BotUser struct {
			DisplayName  string `json:"display_name"`
			AlwaysOnline bool   `json:"always_online"`
		} `json:"bot_user"`
	} `json:"features"`
	OAuthConfig struct {
		Scopes struct {
			Bot []string `json:"bot"`
		} `json:"scopes"`
	} `json:"oauth_config"`
	Settings struct {
		Interactivity struct {
			IsEnabled  bool   `json:"is_enabled"`
			RequestURL string `json:"request_url"`
		} `json:"interactivity"`
		SocketModeEnabled    bool `json:"socket_mode_enabled"`
		OrgDeployEnabled     bool `json:"org_deploy_enabled"`
		TokenRotationEnabled bool `json:"token_rotation_enabled"`
	} `json:"settings"`
}

// slackMethodScope is each slack-go Client method syncmedic calls, with the Web API method it calls and the bot
// scope that method needs ("" for none), from Slack's method reference.
var slackMethodScope = map[string]struct{ api, scope string }{
	"PostMessageContext":   {"chat.postMessage", "chat:write"},
	"UpdateMessageContext": {"chat.update", "chat:write"},
	"PostEphemeralContext": {"chat.postEphemeral", "chat:write"},
	"OpenViewContext":      {"views.open", ""},
	"UpdateViewContext":    {"views.update", ""},
	"GetUserGroupsContext": {"usergroups.list", "usergroups:read"},
	"AuthTestContext":      {"auth.test", ""},
	// Not a Web API call: the scan matches calls by method name, and slog's Logger.Debug shares this one.
	"Debug": {"", ""},
}

// slackClientCalls returns the names of the slack.Client methods the non-test Go files of dirs call.
func slackClientCalls(t *testing.T, dirs ...string) []string {
	t.Helper()
	client := reflect.TypeOf(&slack.Client{})
	seen := map[string]bool{}
	for _, dir := range dirs {
		files, err := filepath.Glob(filepath.Join(dir, "*.go"))
		require.NoError(t, err)
		for _, file := range files {
			if strings.HasSuffix(file, "_test.go") {
				continue
			}
			f, err := parser.ParseFile(token.NewFileSet(), file, nil, 0)
			require.NoError(t, err)
			ast.Inspect(f, func(n ast.Node) bool {
				if call, ok := n.(*ast.CallExpr); ok {
					if sel, ok := call.Fun.(*ast.SelectorExpr); ok {
						if _, ok := client.MethodByName(sel.Sel.Name); ok {
							seen[sel.Sel.Name] = true
						}
					}
				}
				return true
			})
		}
	}
	var out []string
	for m := range seen {
		out = append(out, m)
	}
	sort.Strings(out)
	return out
}

// TestTheSlackAppManifestsGrantExactlyTheScopesSyncmedicCalls parses manifests/slack/app-manifest.yaml (Socket
// Mode) and app-manifest-request-url.yaml (Request URL) and requires their bot scopes to be exactly those of the
// Slack methods notify/slack and cmd/syncmedic call, and the settings each mode needs.
func TestTheSlackAppManifestsGrantExactlyTheScopesSyncmedicCalls(t *testing.T) {
	calls := slackClientCalls(t, filepath.Join("..", "notify", "slack"), filepath.Join("..", "cmd", "syncmedic"))
	require.Contains(t, calls, "PostMessageContext", "the scan of the code found the calls")
	need := map[string]bool{}
	for _, m := range calls {
		s, ok := slackMethodScope[m]
		require.True(t, ok, "syncmedic calls slack.Client.%s, which slackMethodScope does not list: add it with the scope its Web API method needs, and the scope to manifests/slack/*.yaml", m)
		if s.scope != "" {
			need[s.scope] = true
		}
	}
	var want []string
	for s := range need {
		want = append(want, s)
	}
	sort.Strings(want)

	for _, tc := range []struct {
		file       string
		socketMode bool
		requestURL string
	}{
		{file: "app-manifest.yaml", socketMode: true},
		{file: "app-manifest-request-url.yaml", requestURL: "https://syncmedic.example.com/slack/interactions"},
	} {
		t.Run(tc.file, func(t *testing.T) {
			var m slackAppManifest
			b := []byte(readFile(t, filepath.Join("slack", tc.file)))
			require.NoError(t, yaml.UnmarshalStrict(b, &m))
			got := append([]string(nil), m.OAuthConfig.Scopes.Bot...)
			sort.Strings(got)
			require.Equal(t, want, got, "the bot scopes are exactly those of the methods syncmedic calls")
			require.Equal(t, "syncmedic", m.DisplayInformation.Name)
			require.Equal(t, "syncmedic", m.Features.BotUser.DisplayName)
			require.True(t, m.Settings.Interactivity.IsEnabled, "the thread's buttons need interactivity")
			require.Equal(t, tc.socketMode, m.Settings.SocketModeEnabled)
			require.Equal(t, tc.requestURL, m.Settings.Interactivity.RequestURL)
			require.False(t, m.Settings.TokenRotationEnabled, "syncmedic reads a bot token file, it does not refresh rotating tokens")
			require.True(t, bytes.Contains(b, []byte("connections:write")) == tc.socketMode,
				"only the Socket Mode manifest asks for the app-level token (connections:write)")
		})
	}
	require.Contains(t, readFile(t, filepath.Join("..", "docs", "slack.md")), "(../manifests/slack/app-manifest.yaml)", "the Slack page links the manifest")
}
