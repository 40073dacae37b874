package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"sigs.k8s.io/yaml"
)

// TestDeploymentArgsAreServeFlags keeps manifests/base/deployment.yaml in step with `syncmedic serve`: every arg
// and SYNCMEDIC_ variable it sets must be a flag serve knows.
func TestDeploymentArgsAreServeFlags(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "..", "manifests", "base", "deployment.yaml"))
	require.NoError(t, err)
	var d struct {
		Spec struct {
			Template struct {
				Spec struct {
					Containers []struct {
						Args []string
						Env  []struct{ Name string }
					}
				}
			}
		}
	}
	require.NoError(t, yaml.Unmarshal(b, &d))
	c := d.Spec.Template.Spec.Containers[0]
	require.Equal(t, "serve", c.Args[0])
	serve := newServeCommand()
	require.NoError(t, serve.ParseFlags(c.Args[1:]), "manifests/base/deployment.yaml passes a flag serve does not know")
	for _, e := range c.Env {
		flag, ok := strings.CutPrefix(e.Name, "SYNCMEDIC_")
		if !ok {
			continue
		}
		name := strings.ToLower(strings.ReplaceAll(flag, "_", "-"))
		require.NotNil(t, serve.Flags().Lookup(name), "%s names no serve flag", e.Name)
	}
}
