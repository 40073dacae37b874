package argocd

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/syncmedic/syncmedic/internal/argoapi/application"
	"github.com/syncmedic/syncmedic/internal/testenv"
)

func TestDialArgoCDServerWithASelfSignedCertificate(t *testing.T) {
	env := testenv.Kube(t)
	argo := testenv.ArgoCD(t, env, testenv.ArgoCDOptions{DisableAuth: true})
	t.Setenv("ARGOCD_AUTH_TOKEN", "")
	tlsAddr, caPEM := testenv.SelfSignedTLSFront(t, argo.Addr)
	caFile := filepath.Join(t.TempDir(), "tls.crt")
	require.NoError(t, os.WriteFile(caFile, caPEM, 0o600))
	notPEM := filepath.Join(t.TempDir(), "ca.txt")
	require.NoError(t, os.WriteFile(notPEM, []byte("not a certificate\n"), 0o600))

	tests := []struct {
		name    string
		opts    ClientOptions
		wantErr []string
	}{
		{name: "without a CA the certificate is refused, naming --argocd-ca-file and --argocd-insecure",
			opts:    ClientOptions{ServerAddr: tlsAddr},
			wantErr: []string{"presented a certificate this client does not trust", "--argocd-ca-file", "--argocd-insecure", "x509"}},
		{name: "with the server's certificate as --argocd-ca-file the client verifies it and calls it",
			opts: ClientOptions{ServerAddr: tlsAddr, CAFile: caFile}},
		{name: "with --argocd-insecure the client skips verification and calls it",
			opts: ClientOptions{ServerAddr: tlsAddr, Insecure: true}},
		{name: "with --argocd-plaintext against an --insecure argocd-server the client calls it",
			opts: ClientOptions{ServerAddr: argo.Addr, PlainText: true}},
		{name: "TLS against an --insecure argocd-server is refused, naming --argocd-plaintext",
			opts:    ClientOptions{ServerAddr: argo.Addr},
			wantErr: []string{"hung up during the TLS handshake: if it runs with --insecure (plaintext), give --argocd-plaintext"}},
		{name: "with --argocd-grpc-web through the TLS front, verified with --argocd-ca-file, the client calls it over gRPC-web",
			opts: ClientOptions{ServerAddr: tlsAddr, CAFile: caFile, GRPCWeb: true}},
		{name: "with --argocd-grpc-web and --argocd-plaintext the client calls an --insecure argocd-server over gRPC-web",
			opts: ClientOptions{ServerAddr: argo.Addr, PlainText: true, GRPCWeb: true}},
		{name: "a CA file without a certificate is refused before dialing",
			opts:    ClientOptions{ServerAddr: tlsAddr, CAFile: notPEM},
			wantErr: []string{"--argocd-ca-file " + notPEM + " holds no PEM certificate"}},
		{name: "a CA file with --argocd-insecure is refused before dialing",
			opts:    ClientOptions{ServerAddr: tlsAddr, CAFile: caFile, Insecure: true},
			wantErr: []string{"--argocd-ca-file excludes --argocd-plaintext and --argocd-insecure"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			c, err := DialContext(ctx, tt.opts)
			if len(tt.wantErr) > 0 {
				require.Error(t, err)
				for _, want := range tt.wantErr {
					require.Contains(t, err.Error(), want)
				}
				return
			}
			require.NoError(t, err)
			defer c.Close()
			_, err = c.List(ctx, &application.ApplicationQuery{})
			require.NoError(t, err, "a call through the connection")
		})
	}
}

// TestGRPCWebTunnelCarriesWatchesAndErrors runs the calls the watcher makes through the gRPC-web tunnel against the
// real argocd-server: a server stream (Watch) delivers the applications as they change, and an error keeps its
// gRPC code and message.
func TestGRPCWebTunnelCarriesWatchesAndErrors(t *testing.T) {
	env := testenv.Kube(t)
	argo := testenv.ArgoCD(t, env, testenv.ArgoCDOptions{DisableAuth: true})
	t.Setenv("ARGOCD_AUTH_TOKEN", "")
	c, err := Dial(ClientOptions{ServerAddr: argo.Addr, PlainText: true, GRPCWeb: true})
	require.NoError(t, err)
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	t.Run("a Watch streams an application created after it opened", func(t *testing.T) {
		stream, err := c.Watch(ctx, &application.ApplicationQuery{})
		require.NoError(t, err)
		name := "grpcweb-watched"
		created := make(chan struct{})
		go func() {
			defer close(created)
			time.Sleep(500 * time.Millisecond) // let the watch open first
			argo.CreateApplication(t, argo.NewApplication(name, "default"))
		}()
		for {
			ev, err := stream.Recv()
			require.NoError(t, err)
			if ev.Application.Name == name {
				break
			}
		}
		<-created
	})
	t.Run("an error keeps argocd-server's code and message", func(t *testing.T) {
		direct, err := Dial(ClientOptions{ServerAddr: argo.Addr, PlainText: true})
		require.NoError(t, err)
		defer direct.Close()
		q := &application.ApplicationQuery{Name: ptr("no-such-application")}
		_, want := direct.Get(ctx, q)
		_, got := c.Get(ctx, q)
		require.Error(t, want)
		require.Error(t, got)
		ws, _ := status.FromError(want)
		gs, ok := status.FromError(got)
		require.True(t, ok, "a gRPC status: %v", got)
		require.Equal(t, ws.Code(), gs.Code(), "over gRPC-web: %v; over gRPC: %v", got, want)
		require.Equal(t, ws.Message(), gs.Message())
		require.NotEqual(t, codes.Unknown, gs.Code())
	})
}

// TestAnHTTP1OnlyProxyIsNamed puts argocd-server behind a proxy that speaks only HTTP/1.1 (a common ingress setup):
// gRPC cannot pass, and the error says to give --argocd-grpc-web; with it, the same proxy carries the calls.
func TestAnHTTP1OnlyProxyIsNamed(t *testing.T) {
	env := testenv.Kube(t)
	argo := testenv.ArgoCD(t, env, testenv.ArgoCDOptions{DisableAuth: true})
	t.Setenv("ARGOCD_AUTH_TOKEN", "")
	target, err := url.Parse("http://" + argo.Addr)
	require.NoError(t, err)
	front := httptest.NewServer(httputil.NewSingleHostReverseProxy(target)) // HTTP/1.1 only: no h2c
	defer front.Close()
	addr := strings.TrimPrefix(front.URL, "http://")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	t.Run("without --argocd-grpc-web the error names the flag", func(t *testing.T) {
		_, err := DialContext(ctx, ClientOptions{ServerAddr: addr, PlainText: true})
		require.Error(t, err)
		require.Contains(t, err.Error(), "answers gRPC-web but not gRPC")
		require.Contains(t, err.Error(), "give --argocd-grpc-web")
	})
	t.Run("with --argocd-grpc-web the calls pass", func(t *testing.T) {
		c, err := DialContext(ctx, ClientOptions{ServerAddr: addr, PlainText: true, GRPCWeb: true})
		require.NoError(t, err)
		defer c.Close()
		_, err = c.List(ctx, &application.ApplicationQuery{})
		require.NoError(t, err)
	})
	t.Run("a server that answers neither gets no gRPC-web hint", func(t *testing.T) {
		nothing := httptest.NewServer(http.NotFoundHandler())
		defer nothing.Close()
		_, err := DialContext(ctx, ClientOptions{ServerAddr: strings.TrimPrefix(nothing.URL, "http://"), PlainText: true})
		require.Error(t, err)
		require.NotContains(t, err.Error(), "grpc-web")
	})
}

func ptr[T any](v T) *T { return &v }
