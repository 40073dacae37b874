package argocd

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/emptypb"
)

// TestGRPCWebTunnelMapsWhatAProxyAnswers covers the answers an ingress or proxy in front of argocd-server gives a
// gRPC-web request besides a stream of messages (the real argocd-server's are in TestGRPCWebTunnelCarriesWatchesAndErrors):
// each becomes the gRPC code a caller acts on (retry, fix the token), with the request's path and token passed on,
// and the transport never repeats a call by itself.
func TestGRPCWebTunnelMapsWhatAProxyAnswers(t *testing.T) {
	tests := []struct {
		name     string
		answer   func(w http.ResponseWriter)
		wantCode codes.Code
		wantMsg  string
		tries    int
	}{
		{name: "an HTTP 502 from the ingress is Unavailable (what the watcher and the remedies back off and retry on), tried once",
			answer:   func(w http.ResponseWriter) { w.WriteHeader(http.StatusBadGateway) },
			wantCode: codes.Unavailable, wantMsg: "HTTP 502", tries: 1},
		{name: "an HTTP 401 is Unauthenticated",
			answer:   func(w http.ResponseWriter) { w.WriteHeader(http.StatusUnauthorized) },
			wantCode: codes.Unauthenticated, wantMsg: "HTTP 401", tries: 1},
		{name: "a trailers-only answer keeps its grpc-status and grpc-message",
			answer: func(w http.ResponseWriter) {
				w.Header().Set("Grpc-Status", "7")
				w.Header().Set("Grpc-Message", "permission denied")
				w.WriteHeader(http.StatusOK)
			},
			wantCode: codes.PermissionDenied, wantMsg: "permission denied", tries: 1},
		{name: "a trailer frame after the messages keeps its grpc-status",
			answer: func(w http.ResponseWriter) {
				w.Header().Set("Content-Type", "application/grpc-web+proto")
				trailer := "grpc-status: 5\r\ngrpc-message: not there\r\n"
				_, _ = w.Write(append([]byte{0x80, 0, 0, 0, byte(len(trailer))}, trailer...))
			},
			wantCode: codes.NotFound, wantMsg: "not there", tries: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var path, token, contentType string
			tries := 0
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				path, token, contentType = r.URL.Path, r.Header.Get("token"), r.Header.Get("Content-Type")
				tries++
				tt.answer(w)
			}))
			defer srv.Close()
			t.Setenv(EnvAuthToken, "s3cret")
			c, err := Dial(ClientOptions{ServerAddr: strings.TrimPrefix(srv.URL, "http://"), PlainText: true,
				GRPCWebRootPath: "/argocd/"})
			require.NoError(t, err)
			defer c.Close()
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			_, err = c.Version(ctx, &emptypb.Empty{})
			st, ok := status.FromError(err)
			require.True(t, ok, "%v", err)
			require.Equal(t, tt.wantCode, st.Code(), "%v", err)
			require.Contains(t, st.Message(), tt.wantMsg)
			require.Equal(t, "/argocd/version.VersionService/Version", path)
			require.Equal(t, "s3cret", token)
			require.Equal(t, "application/grpc-web+proto", contentType)
			require.Equal(t, tt.tries, tries, "calls that reached the proxy")
		})
	}
}
