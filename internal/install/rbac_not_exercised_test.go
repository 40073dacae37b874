package install

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
	"sigs.k8s.io/yaml"

	"github.com/syncmedic/syncmedic/internal/testenv"
)

// notExercisedGrant is an entry of rbac-not-exercised.yaml: a permission an install grants that the install tests
// do not use, Verb on Group/Resource (for the object Name only when the grant names one), with the Scenario that
// needs it and Why the install tests do not run it.
type notExercisedGrant struct {
	Verb, Group, Resource, Name string
	Scenario, Why               string
}

// rbacNotExercised reads rbac-not-exercised.yaml, the permissions the install tests do not use.
func rbacNotExercised(t *testing.T) []notExercisedGrant {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(repoRoot(t), "internal", "install", "rbac-not-exercised.yaml"))
	require.NoError(t, err)
	var list []notExercisedGrant
	require.NoError(t, yaml.UnmarshalStrict(b, &list), "rbac-not-exercised.yaml")
	return list
}

// key names the entry as grantKey names its grant.
func (e notExercisedGrant) key() string {
	return grantKey(testenv.Grant{Verb: e.Verb, Group: e.Group, Resource: e.Resource, Name: e.Name})
}

// grantKey names a grant whatever its namespace and role: verb group/resource "name".
func grantKey(g testenv.Grant) string {
	res := g.Resource
	if g.Group != "" {
		res = g.Group + "/" + res
	}
	if g.Name != "" {
		res += fmt.Sprintf(" %q", g.Name)
	}
	return g.Verb + " " + res
}

// notExercised returns the entry of list that names key (grantKey).
func notExercised(list []notExercisedGrant, key string) (notExercisedGrant, bool) {
	for _, e := range list {
		if e.key() == key {
			return e, true
		}
	}
	return notExercisedGrant{}, false
}
