package ui

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// One caller holds at most maxStreamsPerCaller live streams open: the next is refused with 429 and a message saying
// why; another caller is not counted against it, and a closed stream makes room.
func TestLiveStreamsPerCallerAreBounded(t *testing.T) {
	srv := newServer(t)
	open := func(h http.Header) (*http.Response, context.CancelFunc) {
		t.Helper()
		ctx, cancel := context.WithCancel(context.Background())
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL+IncidentsPath+"?watch=true", nil)
		require.NoError(t, err)
		req.Header = h
		res, err := srv.Client().Do(req)
		require.NoError(t, err)
		t.Cleanup(func() { cancel(); res.Body.Close() })
		return res, cancel
	}
	// firstEvent reads the stream's first event: the handler holds its place from then on.
	firstEvent := func(res *http.Response) {
		t.Helper()
		require.Equal(t, http.StatusOK, res.StatusCode)
		line, err := bufio.NewReader(res.Body).ReadString('\n')
		require.NoError(t, err)
		require.Equal(t, "event: incidents\n", line)
	}
	refused := func(res *http.Response) string {
		t.Helper()
		defer res.Body.Close()
		require.Equal(t, http.StatusTooManyRequests, res.StatusCode)
		require.Equal(t, "30", res.Header.Get("Retry-After"))
		var e Error
		require.NoError(t, json.NewDecoder(res.Body).Decode(&e))
		return e.Error
	}
	token := bearer(apiToken)
	var cancels []context.CancelFunc
	for range maxStreamsPerCaller {
		res, cancel := open(token)
		firstEvent(res)
		cancels = append(cancels, cancel)
	}
	res, _ := open(token)
	require.Equal(t, "the API token holder via api-token from 127.0.0.1 has 8 live streams (watch=true) open already: "+
		"close one (another tab?) or list without watch=true", refused(res))

	alice := viaArgoCD("argocd:checkout", "payments")
	for range maxStreamsPerCaller {
		res, _ := open(alice)
		firstEvent(res)
	}
	res, _ = open(alice)
	require.True(t, strings.HasPrefix(refused(res), "argocd user alice via argocd-extension has 8 live streams"))

	cancels[0]()
	require.Eventually(t, func() bool {
		res, cancel := open(token)
		defer cancel()
		return res.StatusCode == http.StatusOK
	}, 10*time.Second, 50*time.Millisecond, "a closed stream makes room")
}
