package fluxreal

import (
	"bytes"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/repo"
	"sigs.k8s.io/yaml"
)

func get(t *testing.T, url string) []byte {
	t.Helper()
	res, err := http.Get(url)
	require.NoError(t, err)
	defer res.Body.Close()
	require.Equal(t, http.StatusOK, res.StatusCode, url)
	b, err := io.ReadAll(res.Body)
	require.NoError(t, err)
	return b
}

func TestRepoServesAnIndexAndTheChartsPublishedIntoIt(t *testing.T) {
	r := NewRepo(t)
	var empty repo.IndexFile
	require.NoError(t, yaml.Unmarshal(get(t, r.URL+"/index.yaml"), &empty))
	require.Empty(t, empty.Entries, "a new repository has no charts")

	for _, tc := range []struct {
		name      string
		publish   func()
		chart     string
		version   string
		templates []string
		contains  string
	}{
		{name: "a ConfigMap chart is packaged with its one template", chart: "api", version: "1.0.0", templates: []string{"templates/configmap.yaml"},
			publish: func() { r.Publish(t, ConfigMapChart("api", "1.0.0")) }},
		{name: "a failing chart names the missing namespace in its template", chart: "database", version: "1.0.0", templates: []string{"templates/configmap.yaml"}, contains: "namespace: nowhere",
			publish: func() { r.Publish(t, FailingChart("database", "1.0.0", "nowhere")) }},
		{name: "a Job chart adds the Job a release waits for, a container of the node that waits for its gate", chart: "api", version: "1.1.0",
			templates: []string{"templates/configmap.yaml", "templates/job.yaml"}, contains: "until [ -e /gate/{{ .Release.Name }}-migrate.open ]",
			publish: func() { r.Publish(t, JobChart("api", "1.1.0", "/nowhere")) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.publish()
			var index repo.IndexFile
			require.NoError(t, yaml.Unmarshal(get(t, r.URL+"/index.yaml"), &index))
			cv, err := index.Get(tc.chart, tc.version)
			require.NoError(t, err)
			require.NotEmpty(t, cv.Digest)
			require.Len(t, cv.URLs, 1)
			ch, err := loader.LoadArchive(bytes.NewReader(get(t, cv.URLs[0])))
			require.NoError(t, err)
			require.Equal(t, tc.version, ch.Metadata.Version)
			var names []string
			var text strings.Builder
			for _, f := range ch.Templates {
				names = append(names, f.Name)
				text.Write(f.Data)
			}
			require.ElementsMatch(t, tc.templates, names)
			require.Contains(t, text.String(), tc.contains)
		})
	}
}
