package fluxreal

import (
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/provenance"
	"helm.sh/helm/v3/pkg/repo"
	"sigs.k8s.io/yaml"

	"github.com/syncmedic/syncmedic/internal/testenv"
)

// Repo is a Helm repository served over HTTP on 127.0.0.1: index.yaml and the chart archives published into it.
// Charts can be published at any time (a chart that "becomes available later").
type Repo struct {
	// URL is the repository's address, for a HelmRepository's spec.url.
	URL string

	dir   string
	mu    sync.Mutex
	index *repo.IndexFile
}

// NewRepo starts an empty Helm repository, stopped when t ends.
func NewRepo(t testing.TB) *Repo {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("fluxreal: helm repository: %v", err)
	}
	r := &Repo{URL: "http://" + l.Addr().String(), dir: t.TempDir(), index: repo.NewIndexFile()}
	if err := r.writeIndex(); err != nil {
		t.Fatalf("fluxreal: helm repository: %v", err)
	}
	srv := &http.Server{Handler: http.FileServer(http.Dir(r.dir))}
	go func() { _ = srv.Serve(l) }()
	t.Cleanup(func() { _ = srv.Close() })
	return r
}

// Publish packages ch with the Helm SDK (chartutil.Save), adds it to the index and serves it.
func (r *Repo) Publish(t testing.TB, ch *chart.Chart) {
	t.Helper()
	if err := r.publish(ch); err != nil {
		t.Fatalf("fluxreal: publishing chart %s-%s: %v", ch.Name(), ch.Metadata.Version, err)
	}
}

func (r *Repo) publish(ch *chart.Chart) error {
	if err := ch.Validate(); err != nil {
		return err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	path, err := chartutil.Save(ch, r.dir)
	if err != nil {
		return err
	}
	digest, err := provenance.DigestFile(path)
	if err != nil {
		return err
	}
	if err := r.index.MustAdd(ch.Metadata, filepath.Base(path), r.URL, digest); err != nil {
		return err
	}
	r.index.SortEntries()
	return r.writeIndex()
}

// writeIndex replaces index.yaml atomically, so a fetch never reads half a file.
func (r *Repo) writeIndex() error {
	data, err := yaml.Marshal(r.index)
	if err != nil {
		return err
	}
	tmp := filepath.Join(r.dir, ".index.yaml.tmp")
	if err := os.WriteFile(tmp, data, 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, filepath.Join(r.dir, "index.yaml"))
}

// Chart builds an in-memory chart named name at version whose templates are the given files (file name → template
// text), ready for Publish.
func Chart(name, version string, templates map[string]string) *chart.Chart {
	ch := &chart.Chart{Metadata: &chart.Metadata{APIVersion: chart.APIVersionV2, Name: name, Version: version, Type: "application"}}
	for file, text := range templates {
		ch.Templates = append(ch.Templates, &chart.File{Name: "templates/" + file, Data: []byte(text)})
	}
	return ch
}

// ConfigMapChart is a chart of one ConfigMap ({{ .Release.Name }}-config) holding the chart version: it installs at
// once and nothing waits for a kubelet.
func ConfigMapChart(name, version string) *chart.Chart {
	return Chart(name, version, map[string]string{"configmap.yaml": `apiVersion: v1
kind: ConfigMap
metadata:
  name: {{ .Release.Name }}-config
data:
  chartVersion: {{ .Chart.Version | quote }}
`})
}

// FailingChart is a chart whose install fails at once, the way a real one does when a template names a namespace
// that does not exist: the apiserver refuses its ConfigMap with "namespaces \"missing\" not found". Creating that
// namespace removes the cause, so a later attempt succeeds.
func FailingChart(name, version, missingNamespace string) *chart.Chart {
	return Chart(name, version, map[string]string{"configmap.yaml": fmt.Sprintf(`apiVersion: v1
kind: ConfigMap
metadata:
  name: {{ .Release.Name }}-config
  namespace: %s
data:
  chartVersion: {{ .Chart.Version | quote }}
`, missingNamespace)})
}

// JobChart is a chart of a ConfigMap and a Job ({{ .Release.Name }}-migrate) whose Pod runs on the real node until
// the test opens its gate (HeldJob): a busybox container (testenv.NodeBusyboxImage, never pulled) that appends its
// Pod's name to <job>.runs in hostDir (a hostPath volume) when it starts, then waits until <job>.open exists there.
// helm-controller waits for the Job (kstatus) meanwhile — a release whose install or upgrade takes as long as the
// test wants, and a count of how often the chart's Job really ran.
func JobChart(name, version, hostDir string) *chart.Chart {
	ch := ConfigMapChart(name, version)
	ch.Templates = append(ch.Templates, &chart.File{Name: "templates/job.yaml", Data: []byte(fmt.Sprintf(`apiVersion: batch/v1
kind: Job
metadata:
  name: {{ .Release.Name }}-migrate
spec:
  backoffLimit: 0
  template:
    metadata:
      labels:
        fluxreal.syncmedic.io/release: {{ .Release.Name }}
    spec:
      restartPolicy: Never
      terminationGracePeriodSeconds: 1
      containers:
        - name: migrate
          image: %s
          imagePullPolicy: Never
          command:
            - sh
            - -c
            - echo "$HOSTNAME" >> %[2]s/{{ .Release.Name }}-migrate.runs && until [ -e %[2]s/{{ .Release.Name }}-migrate.open ]; do sleep 0.2; done
          volumeMounts:
            - {name: gate, mountPath: %[2]s}
      volumes:
        - name: gate
          hostPath: {path: %[3]q, type: Directory}
`, testenv.NodeBusyboxImage, jobGateDir, hostDir))})
	return ch
}

// jobGateDir is where the container of a JobChart's Job finds its host directory.
const jobGateDir = "/gate"
