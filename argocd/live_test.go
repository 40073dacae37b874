package argocd

import (
	"errors"
	"os"
	"testing"

	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/syncmedic/syncmedic"
)

func TestClassify(t *testing.T) {
	tests := []struct {
		name      string
		call      Call
		err       error
		permanent bool
		mentions  string
	}{
		{"permission denied on PatchResource names the update permission", CallPatchResource, status.Error(codes.PermissionDenied, "permission denied"), true, "applications, update"},
		{"permission denied on TerminateOperation names the sync permission", CallTerminateOperation, status.Error(codes.PermissionDenied, "permission denied"), true, "applications, sync"},
		{"permission denied on Watch names the get permission", CallWatch, status.Error(codes.PermissionDenied, "permission denied"), true, "applications, get"},
		{"an expired token is permanent", CallSync, status.Error(codes.Unauthenticated, "invalid session"), true, "token"},
		{"an unavailable server is retried", CallWatch, status.Error(codes.Unavailable, "connection refused"), false, "connection refused"},
		{"a plain error is retried", CallGet, errors.New("boom"), false, "boom"},
		{"a Sync refused by a sync window is not an RBAC problem and is retried after the window", CallSync,
			status.Error(codes.PermissionDenied, "cannot sync: blocked by sync window"), false, "sync window of the application's project blocks manual syncs"},
		{"a Sync carrying Replace=true refused by the server's setting is permanent and names the setting", CallSync,
			status.Error(codes.FailedPrecondition, "sync with replace was disabled on the API Server level via the server configuration"), true,
			`server.sync.replace.allowed: "false" in argocd-cmd-params-cm`},
		{"any other refusal of a Sync is permanent", CallSync,
			status.Error(codes.FailedPrecondition, "Cannot use local manifests when source integrity is enforced"), true, "the same request would be refused again"},
		{"another operation in progress stays retryable", CallSync,
			status.Error(codes.FailedPrecondition, "another operation is already in progress"), false, "another operation"},
		{"a revision the repo-server could not resolve stays retryable", CallSync,
			status.Error(codes.FailedPrecondition, "error resolving repo revision: rpc error: connection refused"), false, "error resolving repo revision"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := Classify(tt.call, "argocd/shop", tt.err)
			require.Equal(t, tt.permanent, syncmedic.IsPermanent(err))
			require.ErrorContains(t, err, tt.mentions)
			require.ErrorContains(t, err, "argocd/shop")
		})
	}
}

func TestDialNeverPrintsTheToken(t *testing.T) {
	const secret = "s3cr3t-argocd-token-value"
	file := t.TempDir() + "/token"
	require.NoError(t, os.WriteFile(file, []byte(secret+"\n"), 0o600))
	_, err := Dial(ClientOptions{ServerAddr: "127.0.0.1:1", TokenFile: file, PlainText: true})
	require.Error(t, err)
	require.NotContains(t, err.Error(), secret)

	t.Run("an empty token file is named in the error", func(t *testing.T) {
		empty := t.TempDir() + "/empty"
		require.NoError(t, os.WriteFile(empty, []byte("\n"), 0o600))
		_, err := Dial(ClientOptions{ServerAddr: "127.0.0.1:1", TokenFile: empty, PlainText: true})
		require.ErrorContains(t, err, "is empty")
	})
}
