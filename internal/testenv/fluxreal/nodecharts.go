package fluxreal

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/provenance"
	"helm.sh/helm/v3/pkg/repo"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	"github.com/syncmedic/syncmedic/internal/testenv"
)

// ServeChartsOnNode serves charts as a Helm repository inside the real node's cluster: their archives and
// index.yaml (relative URLs) in the ConfigMap charts of ns, served by a busybox httpd Pod behind the Service charts.
// It returns the repository's URL by the Service's DNS name, for a HelmRepository that source-controller, running as
// a Pod (Node.InstallFlux), fetches. The objects go with ns.
func ServeChartsOnNode(t testing.TB, n *testenv.Node, ns string, charts ...*chart.Chart) string {
	t.Helper()
	ctx := context.Background()
	core := n.Clientset.CoreV1()
	index := repo.NewIndexFile()
	archives := map[string][]byte{}
	dir := t.TempDir()
	for _, ch := range charts {
		p, err := chartutil.Save(ch, dir)
		if err != nil {
			t.Fatalf("fluxreal: packaging %s: %v", ch.Name(), err)
		}
		digest, err := provenance.DigestFile(p)
		if err != nil {
			t.Fatalf("fluxreal: %v", err)
		}
		if err := index.MustAdd(ch.Metadata, filepath.Base(p), "", digest); err != nil {
			t.Fatalf("fluxreal: %v", err)
		}
		if archives[filepath.Base(p)], err = os.ReadFile(p); err != nil {
			t.Fatalf("fluxreal: %v", err)
		}
	}
	index.SortEntries()
	indexYAML, err := yaml.Marshal(index)
	if err != nil {
		t.Fatalf("fluxreal: %v", err)
	}
	labels := map[string]string{"app": "charts"}
	objs := []func() error{
		func() error {
			_, err := core.ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "charts"},
				Data: map[string]string{"index.yaml": string(indexYAML)}, BinaryData: archives}, metav1.CreateOptions{})
			return err
		},
		func() error {
			_, err := core.Pods(ns).Create(ctx, &corev1.Pod{
				ObjectMeta: metav1.ObjectMeta{Name: "charts", Labels: labels},
				Spec: corev1.PodSpec{
					TerminationGracePeriodSeconds: ptr.To[int64](1),
					Containers: []corev1.Container{{Name: "httpd", Image: testenv.NodeBusyboxImage, ImagePullPolicy: corev1.PullNever,
						Command:      []string{"httpd", "-f", "-p", "8080", "-h", "/www"},
						VolumeMounts: []corev1.VolumeMount{{Name: "www", MountPath: "/www"}}}},
					Volumes: []corev1.Volume{{Name: "www", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
						LocalObjectReference: corev1.LocalObjectReference{Name: "charts"}}}}},
				},
			}, metav1.CreateOptions{})
			return err
		},
		func() error {
			_, err := core.Services(ns).Create(ctx, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "charts"},
				Spec: corev1.ServiceSpec{Selector: labels, Ports: []corev1.ServicePort{{Port: 80, TargetPort: intstr.FromInt32(8080)}}}},
				metav1.CreateOptions{})
			return err
		},
	}
	for _, create := range objs {
		if err := create(); err != nil {
			t.Fatalf("fluxreal: the chart server in %s: %v", ns, err)
		}
	}
	n.WaitServiceReachable(t, ns, "charts")
	return "http://charts." + ns + ".svc." + testenv.ClusterDomain
}
