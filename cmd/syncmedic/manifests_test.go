package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strconv"
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

// TestThePodsTerminationGraceLetsARemedyFinish keeps the shipped Deployments' terminationGracePeriodSeconds above
// what serve's shutdown may take (--remedy-drain, then --shutdown-grace for the HTTP servers), so the kubelet never
// kills a serve whose terminate-and-resync has terminated the operation and not yet synced again.
func TestThePodsTerminationGraceLetsARemedyFinish(t *testing.T) {
	serve := newServeCommand()
	drain, err := serve.Flags().GetDuration("remedy-drain")
	require.NoError(t, err)
	grace, err := serve.Flags().GetDuration("shutdown-grace")
	require.NoError(t, err)
	need := int((drain + grace).Seconds())
	graceLine := regexp.MustCompile(`(?m)^\s+terminationGracePeriodSeconds: (\d+)$`)
	for _, p := range []string{"manifests/base/deployment.yaml", "charts/syncmedic/templates/deployment.yaml"} {
		b, err := os.ReadFile(filepath.Join("..", "..", p))
		require.NoError(t, err)
		m := graceLine.FindSubmatch(b)
		require.NotNil(t, m, "%s sets no terminationGracePeriodSeconds: the default 30s cuts a remedy off between its writes", p)
		got, err := strconv.Atoi(string(m[1]))
		require.NoError(t, err)
		require.Greater(t, got, need, "%s: terminationGracePeriodSeconds %d must exceed --remedy-drain %s + --shutdown-grace %s", p, got, drain, grace)
	}
}
