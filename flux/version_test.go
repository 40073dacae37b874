package flux

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestImageTag(t *testing.T) {
	tests := []struct{ name, image, want string }{
		{name: "a tagged image gives its tag", image: "ghcr.io/fluxcd/helm-controller:v0.36.2", want: "v0.36.2"},
		{name: "a tag followed by a digest gives the tag", image: "ghcr.io/fluxcd/helm-controller:v1.1.0@sha256:0123abcd", want: "v1.1.0"},
		{name: "a registry port is not a tag", image: "registry.local:5000/fluxcd/helm-controller"},
		{name: "an image by digest only has no tag", image: "ghcr.io/fluxcd/helm-controller@sha256:0123abcd"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { require.Equal(t, tt.want, imageTag(tt.image)) })
	}
}
