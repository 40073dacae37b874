package cmp

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestRemoteHost(t *testing.T) {
	for entry, want := range map[string]string{
		"https://example.com/deploy/cm.yaml":              "example.com",
		"http://169.254.169.254/latest/meta-data/x.yaml":  "169.254.169.254",
		"https://[fd00:ec2::254]:8443/x.yaml":             "fd00:ec2::254",
		"git::https://gitlab.example.com/team/deploy.git": "gitlab.example.com",
		"ssh://git@git.example.com:2222/team/deploy.git":  "git.example.com",
		"git@git.example.com:team/deploy.git":             "git.example.com",
		"gh:example/deploy//base":                         "github.com",
		"github.com/example/deploy//base?ref=v1":          "github.com",
	} {
		require.Equal(t, want, remoteHost(entry), entry)
	}
}

// TestBoundedTransportRefusesMetadataAddresses dials through the transport kustomize's fetches use once remote
// resources are allowed: the refusal happens at the dial, on the address actually dialled (so a name that resolves
// there later is refused too), and nothing is sent.
func TestBoundedTransportRefusesMetadataAddresses(t *testing.T) {
	tr := newBoundedTransport()
	for _, u := range []string{"http://169.254.169.254/latest/meta-data/", "http://[fe80::1]/", "http://0.0.0.0/", "http://[fd00:ec2::254]/"} {
		req, err := http.NewRequest(http.MethodGet, u, nil)
		require.NoError(t, err)
		_, err = tr.RoundTrip(req)
		require.ErrorContains(t, err, "is refused: link-local, unspecified and multicast addresses (the cloud metadata services among them) are never fetched", u)
	}
}
