package manifests

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"

	"github.com/syncmedic/syncmedic/internal/testenv"
)

// chartDir is the Helm chart, relative to this package.
const chartDir = "../charts/syncmedic"

// helmTemplate runs the real helm CLI (bin/helm, built by hack/helm-tools.sh) as `helm template release chartDir
// -n namespace --set …` and returns the objects it renders.
func helmTemplate(t *testing.T, release, namespace string, set ...string) []*unstructured.Unstructured {
	t.Helper()
	out, err := runHelm(t, release, namespace, set...)
	require.NoError(t, err)
	return decodeObjects(t, out)
}

// runHelm runs `helm template` with each of set as --set, or as a flag when it starts with "--", and returns its
// standard output; the error carries its standard error.
func runHelm(t *testing.T, release, namespace string, set ...string) ([]byte, error) {
	t.Helper()
	args := []string{"template", release, chartDir, "--namespace", namespace}
	for _, s := range set {
		if strings.HasPrefix(s, "--") { // a flag of helm template, e.g. --skip-schema-validation
			args = append(args, s)
			continue
		}
		args = append(args, "--set", s)
	}
	cmd := testenv.HelmCommand(t, args...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, errors.New(stderr.String())
	}
	return out, nil
}

// decodeObjects splits a multi-document YAML stream into objects, skipping empty documents.
func decodeObjects(t *testing.T, stream []byte) []*unstructured.Unstructured {
	t.Helper()
	r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(stream)))
	var objs []*unstructured.Unstructured
	for {
		doc, err := r.Read()
		if err == io.EOF {
			return objs
		}
		require.NoError(t, err)
		var m map[string]interface{}
		require.NoError(t, yaml.Unmarshal(doc, &m))
		if len(m) == 0 {
			continue
		}
		objs = append(objs, &unstructured.Unstructured{Object: m})
	}
}
