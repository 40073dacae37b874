package testenv

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestArgoCDServerStopsWhileAGRPCWebStreamIsOpen stops argocd-server while a gRPC-web Watch is being served (what a
// test that ends right after its gRPC-web calls does): argocd-server's own shutdown panics then, in grpc-go's
// handler transport, and takes the test binary with it; http1Guard must end the request first.
func TestArgoCDServerStopsWhileAGRPCWebStreamIsOpen(t *testing.T) {
	env := Kube(t)
	a := ArgoCD(t, env, ArgoCDOptions{DisableAuth: true})
	a.CreateApplication(t, a.NewApplication("watched", env.Namespace(t))) // the Watch sends it at once: headers and a frame
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	// An empty ApplicationQuery, framed as gRPC-web: flag 0, length 0.
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+a.Addr+"/application.ApplicationService/Watch", bytes.NewReader(make([]byte, 5)))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/grpc-web+proto")
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Empty(t, resp.Header.Get("Grpc-Status"), "the Watch is open, not answered at once")
	frame := make([]byte, 5)
	_, err = io.ReadFull(resp.Body, frame)
	require.NoError(t, err)
	require.Zero(t, frame[0], "a message frame (the application), not the trailer")

	a.stopServer() // with the stream open: this returns, instead of panicking
	_, _ = io.ReadAll(resp.Body)
	require.NoError(t, ctx.Err(), "the stream ended with the server, not at the test's deadline")
}
