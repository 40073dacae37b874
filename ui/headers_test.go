package ui

import (
	"testing"

	"github.com/argoproj/argo-cd/v2/server/extension"
)

// TestHeaderNamesAreArgoCDs keeps the header names syncmedic reads equal to the ones argocd-server's extension proxy
// sets (the binary does not import Argo CD's server package, which brings the whole server with it).
func TestHeaderNamesAreArgoCDs(t *testing.T) {
	for _, c := range []struct{ ours, argocds string }{
		{headerApplicationName, extension.HeaderArgoCDApplicationName},
		{headerProjectName, extension.HeaderArgoCDProjectName},
		{headerUsername, extension.HeaderArgoCDUsername},
		{headerGroups, extension.HeaderArgoCDGroups},
	} {
		t.Run(c.ours+" is Argo CD's header", func(t *testing.T) {
			if c.ours != c.argocds {
				t.Fatalf("syncmedic reads %q, argocd-server sets %q", c.ours, c.argocds)
			}
		})
	}
}
