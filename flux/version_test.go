package flux

import (
	"testing"

	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	fakediscovery "k8s.io/client-go/discovery/fake"
	k8stesting "k8s.io/client-go/testing"
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

func TestNewestServed(t *testing.T) {
	tests := []struct {
		name   string
		served []string
		want   string
	}{
		{name: "a cluster serving v2 is watched through v2", served: []string{"v2beta1", "v2beta2", "v2"}, want: "v2"},
		{name: "Flux 2.2 (v2beta2 and v2beta1, no v2) is watched through v2beta2", served: []string{"v2beta1", "v2beta2"}, want: "v2beta2"},
		{name: "Flux 2.1 and older (v2beta1 only) is watched through v2beta1", served: []string{"v2beta1"}, want: "v2beta1"},
		{name: "Flux 2.7 (v2 and v2beta2, no v2beta1) is watched through v2", served: []string{"v2beta2", "v2"}, want: "v2"},
		{name: "a version syncmedic does not know is never chosen", served: []string{"v3alpha1", "v2beta2"}, want: "v2beta2"},
		{name: "nothing served gives no version"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { require.Equal(t, tt.want, NewestServed(tt.served)) })
	}
}

func TestServedAPIVersion(t *testing.T) {
	helmReleases := func(versions ...string) []*metav1.APIResourceList {
		var out []*metav1.APIResourceList
		for _, v := range versions {
			out = append(out, &metav1.APIResourceList{GroupVersion: "helm.toolkit.fluxcd.io/" + v, APIResources: []metav1.APIResource{
				{Name: "helmreleases", Kind: "HelmRelease", Namespaced: true},
				{Name: "helmreleases/status", Kind: "HelmRelease", Namespaced: true},
			}})
		}
		return out
	}
	unavailable := func(f *k8stesting.Fake) {
		f.PrependReactor("get", "resource", func(k8stesting.Action) (bool, runtime.Object, error) {
			return true, nil, apierrors.NewServiceUnavailable("etcd is down")
		})
	}
	tests := []struct {
		name      string
		resources []*metav1.APIResourceList
		react     func(*k8stesting.Fake)
		want      string
		wantErr   error
		errSays   string
	}{
		{name: "Flux 2.3 and later are read through v2", resources: helmReleases("v2", "v2beta2", "v2beta1"), want: "v2"},
		{name: "Flux 2.2 is read through v2beta2, the newest of its two versions", resources: helmReleases("v2beta2", "v2beta1"), want: "v2beta2"},
		{name: "Flux 2.1 is read through v2beta1", resources: helmReleases("v2beta1"), want: "v2beta1"},
		{name: "a cluster without Flux says so instead of reporting nothing stuck",
			resources: []*metav1.APIResourceList{{GroupVersion: "apps/v1", APIResources: []metav1.APIResource{{Name: "deployments", Kind: "Deployment"}}}},
			wantErr:   ErrNoHelmReleaseAPI, errSays: "is Flux's helm-controller installed?"},
		{name: "a group version without the HelmRelease kind does not count",
			resources: []*metav1.APIResourceList{{GroupVersion: "helm.toolkit.fluxcd.io/v2", APIResources: []metav1.APIResource{{Name: "others", Kind: "Other"}}}},
			wantErr:   ErrNoHelmReleaseAPI},
		{name: "a discovery failure is an error to retry, not a cluster without Flux", resources: helmReleases("v2"), react: unavailable,
			errSays: "discovering helm.toolkit.fluxcd.io/v2"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dc := &fakediscovery.FakeDiscovery{Fake: &k8stesting.Fake{Resources: tt.resources}}
			if tt.react != nil {
				tt.react(dc.Fake)
			}
			got, err := servedAPIVersion(dc)
			if tt.wantErr == nil && tt.errSays == "" {
				require.NoError(t, err)
				require.Equal(t, tt.want, got)
				return
			}
			require.Error(t, err)
			require.Empty(t, got)
			if tt.wantErr != nil {
				require.ErrorIs(t, err, tt.wantErr)
			} else {
				require.NotErrorIs(t, err, ErrNoHelmReleaseAPI)
			}
			require.Contains(t, err.Error(), tt.errSays)
		})
	}
}
