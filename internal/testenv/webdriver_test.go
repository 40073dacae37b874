package testenv

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestWaitChromedriverTellsAnotherServerFromChromeDriver: a port picked for chromedriver but taken by another server
// answering /status is not taken for chromedriver's (StartOnFreePorts then starts it again on another port).
func TestWaitChromedriverTellsAnotherServerFromChromeDriver(t *testing.T) {
	for _, tc := range []struct {
		name, body string
		ready      bool
	}{
		{"a ready ChromeDriver", `{"value":{"ready":true,"message":"ChromeDriver ready for new sessions."}}`, true},
		{"a ChromeDriver not ready", `{"value":{"ready":false,"message":"ChromeDriver busy"}}`, false},
		{"another server", `{"value":{"ready":true,"message":"something else"}}`, false},
		{"not JSON", `<html>hello</html>`, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte(tc.body)) }))
			defer srv.Close()
			exited := make(chan struct{})
			close(exited) // a child that is gone: the wait ends at once when the answer is not ChromeDriver's
			err := waitChromedriver(strings.TrimPrefix(srv.URL, "http://"), exited)
			if tc.ready {
				require.NoError(t, err)
			} else {
				require.ErrorContains(t, err, "chromedriver exited")
			}
		})
	}
}
