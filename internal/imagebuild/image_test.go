package imagebuild

import (
	"bytes"
	"context"
	"debug/elf"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	"github.com/syncmedic/syncmedic/internal/ociimage"
	"github.com/syncmedic/syncmedic/internal/testenv"
)

func TestMain(m *testing.M) { testenv.Main(m) }

// makefileImage is `make image`'s default IMAGE: the name the manifests and the chart use
// (manifests.TestEveryInstallUsesTheSameImage).
func makefileImage(t *testing.T) string {
	t.Helper()
	m := regexp.MustCompile(`(?m)^IMAGE \?= (\S+)$`).FindStringSubmatch(readRepoFile(t, "Makefile"))
	require.NotNil(t, m, "no `IMAGE ?=` in the Makefile")
	return m[1]
}

// TestMakeImage builds the image twice, as `make image` does, into different directories, checks that both are the
// same bytes holding exactly the image's files, then runs it on the real node under the manifests' name:
// `syncmedic version` and `syncmedic serve` with the chart's security context.
func TestMakeImage(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the syncmedic binary and runs it on the real node: not a -short test")
	}
	name := makefileImage(t)
	version := name[strings.LastIndexByte(name, ':')+1:]
	root, err := filepath.Abs(filepath.Join("..", ".."))
	require.NoError(t, err)
	build := func() (*ociimage.Layout, []byte) {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
		defer cancel()
		l, err := Build(ctx, Options{Name: name, Version: version, Revision: "0123456789abcdef0123456789abcdef01234567",
			ModuleRoot: root, Platforms: []string{"linux/amd64"}, WorkDir: t.TempDir()})
		require.NoError(t, err)
		archive, err := l.Tar()
		require.NoError(t, err)
		return l, archive
	}
	a, archive := build()
	b, again := build()
	t.Run("the same source and version give the same digest and bytes", func(t *testing.T) {
		require.Equal(t, a.Digest, b.Digest)
		require.True(t, bytes.Equal(archive, again), "the two archives differ")
	})
	files, config, err := ociimage.ReadLayer(archive, "linux", "amd64")
	require.NoError(t, err)
	t.Run("the layer holds the binary, the CA bundle, passwd and group, nothing else", func(t *testing.T) {
		checkTree(t, files)
	})
	t.Run("the configuration runs the binary as 65532, labelled", func(t *testing.T) {
		var cfg struct {
			Architecture, OS string
			Created          time.Time
			Config           struct {
				User       string
				Entrypoint []string
				Cmd        []string
				Labels     map[string]string
			}
		}
		require.NoError(t, json.Unmarshal(config, &cfg))
		require.Equal(t, "amd64", cfg.Architecture)
		require.Equal(t, "linux", cfg.OS)
		require.Equal(t, time.Unix(0, 0).UTC(), cfg.Created.UTC())
		require.Equal(t, "65532:65532", cfg.Config.User)
		require.Equal(t, []string{"/usr/local/bin/syncmedic"}, cfg.Config.Entrypoint)
		require.Empty(t, cfg.Config.Cmd)
		require.Equal(t, map[string]string{
			"org.opencontainers.image.source":   "https://github.com/syncmedic/syncmedic",
			"org.opencontainers.image.version":  version,
			"org.opencontainers.image.revision": "0123456789abcdef0123456789abcdef01234567",
		}, cfg.Config.Labels)
	})
	t.Run("the binary is static and stamped with the version", func(t *testing.T) {
		bin := fileData(t, files, BinaryPath)
		f, err := elf.NewFile(bytes.NewReader(bin))
		require.NoError(t, err)
		for _, p := range f.Progs {
			require.NotEqual(t, elf.PT_INTERP, p.Type, "a dynamically linked binary")
		}
		if runtime.GOOS == "linux" && runtime.GOARCH == "amd64" {
			p := filepath.Join(t.TempDir(), "syncmedic")
			require.NoError(t, os.WriteFile(p, bin, 0o755))
			out, err := exec.Command(p, "version").CombinedOutput()
			require.NoError(t, err, "%s", out)
			require.True(t, strings.HasPrefix(string(out), "syncmedic "+version+" ("), "%s", out)
		}
	})
	t.Run("on the real node", func(t *testing.T) {
		n := testenv.RealNode(t)
		n.ImportImage(t, "syncmedic-image.tar", archive)
		ns := n.Namespace(t)
		t.Run("syncmedic version prints the version as the image's non-root user", func(t *testing.T) {
			pod := imagePod(ns, "version", name, "version")
			// runAsNonRoot without runAsUser: the kubelet refuses an image whose USER is root or not numeric.
			pod.Spec.SecurityContext = &corev1.PodSecurityContext{RunAsNonRoot: ptr.To(true)}
			createPod(t, n, pod)
			waitPod(t, n, pod, func(p *corev1.Pod) (bool, error) {
				if p.Status.Phase == corev1.PodFailed {
					return false, fmt.Errorf("failed: %+v", p.Status.ContainerStatuses)
				}
				return p.Status.Phase == corev1.PodSucceeded, nil
			})
			logs := podLogs(t, n, pod)
			require.Equal(t, "syncmedic "+version+" ("+runtime.Version()+", linux/amd64)\n", logs)
		})
		t.Run("syncmedic serve becomes Ready with the chart's security context", func(t *testing.T) {
			pod := imagePod(ns, "serve", name, "serve", "--listen=:9292", "--log-format=text", "--flux-receiver-insecure-no-signature")
			pod.Spec.SecurityContext = &corev1.PodSecurityContext{RunAsNonRoot: ptr.To(true),
				RunAsUser: ptr.To[int64](65532), RunAsGroup: ptr.To[int64](65532), FSGroup: ptr.To[int64](65532),
				SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault}}
			c := &pod.Spec.Containers[0]
			c.ReadinessProbe = &corev1.Probe{PeriodSeconds: 1, ProbeHandler: corev1.ProbeHandler{
				HTTPGet: &corev1.HTTPGetAction{Path: "/readyz", Port: intstr.FromInt32(9292)}}}
			c.VolumeMounts = []corev1.VolumeMount{{Name: "tmp", MountPath: "/tmp"}}
			pod.Spec.Volumes = []corev1.Volume{{Name: "tmp", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}}
			createPod(t, n, pod)
			waitPod(t, n, pod, func(p *corev1.Pod) (bool, error) {
				if p.Status.Phase == corev1.PodFailed || p.Status.Phase == corev1.PodSucceeded {
					return false, fmt.Errorf("serve ended: %+v", p.Status.ContainerStatuses)
				}
				for _, cond := range p.Status.Conditions {
					if cond.Type == corev1.PodReady && cond.Status == corev1.ConditionTrue {
						return true, nil
					}
				}
				return false, nil
			})
			require.Contains(t, podLogs(t, n, pod), "no cluster", "serve started outside a cluster (no token mounted)")
		})
		t.Run("syncmedic serve reads the cluster as its ServiceAccount with the manifests' ClusterRole", func(t *testing.T) {
			sa := serviceAccountWithTheManifestsRole(t, n, ns)
			// In-cluster (KUBERNETES_SERVICE_HOST, the `kubernetes` Service's ClusterIP), as the Deployment runs, and
			// through a kubeconfig naming the apiserver by its Service's DNS name: both need the apiserver's
			// certificate to hold that name, the projected token and kube-root-ca.crt, and the Service routed.
			kubeconfig := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "by-name"}, Data: map[string]string{
				"kubeconfig": `apiVersion: v1
kind: Config
clusters:
- name: c
  cluster:
    server: https://kubernetes.default.svc
    certificate-authority: /var/run/secrets/kubernetes.io/serviceaccount/ca.crt
users:
- name: u
  user:
    tokenFile: /var/run/secrets/kubernetes.io/serviceaccount/token
contexts:
- name: c
  context: {cluster: c, user: u}
current-context: c
`}}
			_, err := n.Clientset.CoreV1().ConfigMaps(ns).Create(context.Background(), kubeconfig, metav1.CreateOptions{})
			require.NoError(t, err)
			for _, how := range []struct{ name, kubeconfig string }{{"in-cluster", ""}, {"by-name", "/kubeconfig/kubeconfig"}} {
				args := []string{"serve", "--listen=:9292", "--log-format=text", "--flux-receiver-insecure-no-signature"}
				if how.kubeconfig != "" {
					args = append(args, "--kubeconfig="+how.kubeconfig)
				}
				pod := imagePod(ns, "serve-"+how.name, name, args...)
				pod.Spec.ServiceAccountName = sa
				pod.Spec.AutomountServiceAccountToken = nil
				pod.Spec.SecurityContext = &corev1.PodSecurityContext{RunAsNonRoot: ptr.To(true)}
				c := &pod.Spec.Containers[0]
				c.VolumeMounts = []corev1.VolumeMount{{Name: "tmp", MountPath: "/tmp"}}
				pod.Spec.Volumes = []corev1.Volume{{Name: "tmp", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}}
				if how.kubeconfig != "" {
					c.VolumeMounts = append(c.VolumeMounts, corev1.VolumeMount{Name: "kubeconfig", MountPath: "/kubeconfig"})
					pod.Spec.Volumes = append(pod.Spec.Volumes, corev1.Volume{Name: "kubeconfig", VolumeSource: corev1.VolumeSource{
						ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: kubeconfig.Name}}}})
				}
				createPod(t, n, pod)
				got, err := n.Clientset.CoreV1().Pods(ns).Get(context.Background(), pod.Name, metav1.GetOptions{})
				require.NoError(t, err)
				require.True(t, hasProjectedToken(got), "ServiceAccount admission mounts the projected token: %+v", got.Spec.Volumes)
				var logs string
				waitPod(t, n, pod, func(p *corev1.Pod) (bool, error) {
					if p.Status.Phase == corev1.PodFailed || p.Status.Phase == corev1.PodSucceeded {
						return false, fmt.Errorf("serve ended: %+v", p.Status.ContainerStatuses)
					}
					if p.Status.Phase != corev1.PodRunning {
						return false, nil
					}
					logs = podLogs(t, n, pod)
					return strings.Contains(logs, "kube scanner synced"), nil
				})
				require.Contains(t, logs, "connected to the apiserver", how.name)
				require.NotContains(t, logs, "no cluster", how.name)
				require.NotContains(t, logs, "forbidden", "the manifests' ClusterRole lets serve read what it watches: %s", logs)
				require.NotContains(t, logs, "x509", "the apiserver's certificate holds the name serve dialed: %s", logs)
			}
		})
	})
}

// checkTree asserts the layer's entries: the four files and their parent directories, owned by root, with fixed
// modes, and the files' contents.
func checkTree(t *testing.T, files []ociimage.File) {
	t.Helper()
	var got []string
	for _, f := range files {
		kind := "f"
		switch {
		case f.Dir:
			kind = "d"
		case f.Link != "":
			kind = "l"
		}
		got = append(got, fmt.Sprintf("%s %04o %d:%d %s", kind, f.Mode, f.UID, f.GID, f.Path))
	}
	require.Equal(t, []string{
		"d 0755 0:0 etc",
		"f 0644 0:0 etc/group",
		"f 0644 0:0 etc/passwd",
		"d 0755 0:0 etc/ssl",
		"d 0755 0:0 etc/ssl/certs",
		"f 0644 0:0 etc/ssl/certs/ca-certificates.crt",
		"d 0755 0:0 usr",
		"d 0755 0:0 usr/local",
		"d 0755 0:0 usr/local/bin",
		"f 0755 0:0 usr/local/bin/syncmedic",
	}, got)
	certs, err := os.ReadFile(DefaultCACertsFile)
	require.NoError(t, err)
	require.Equal(t, certs, fileData(t, files, CACertsPath))
	require.Contains(t, string(fileData(t, files, CACertsPath)), "-----BEGIN CERTIFICATE-----")
	require.Equal(t, "root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:65532:65532:nonroot:/tmp:/sbin/nologin\n",
		string(fileData(t, files, PasswdPath)))
	require.Equal(t, "root:x:0:\nnonroot:x:65532:\n", string(fileData(t, files, GroupPath)))
}

// serviceAccountWithTheManifestsRole creates the ServiceAccount syncmedic in ns, bound to a copy of
// manifests/base's ClusterRole under a name of its own, and returns its name.
func serviceAccountWithTheManifestsRole(t *testing.T, n *testenv.Node, ns string) string {
	t.Helper()
	ctx := context.Background()
	var role rbacv1.ClusterRole
	doc := strings.SplitN(readRepoFile(t, "manifests/base/clusterrole.yaml"), "\n---\n", 2)[0]
	require.NoError(t, yaml.UnmarshalStrict([]byte(doc), &role))
	require.Equal(t, "ClusterRole", role.Kind)
	role.Name = "syncmedic-" + ns
	_, err := n.Clientset.RbacV1().ClusterRoles().Create(ctx, &role, metav1.CreateOptions{})
	require.NoError(t, err)
	_, err = n.Clientset.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: role.Name},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role.Name},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: "syncmedic", Namespace: ns}},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	t.Cleanup(func() {
		_ = n.Clientset.RbacV1().ClusterRoleBindings().Delete(ctx, role.Name, metav1.DeleteOptions{})
		_ = n.Clientset.RbacV1().ClusterRoles().Delete(ctx, role.Name, metav1.DeleteOptions{})
	})
	_, err = n.Clientset.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "syncmedic"}}, metav1.CreateOptions{})
	require.NoError(t, err)
	return "syncmedic"
}

// hasProjectedToken reports whether pod has the projected ServiceAccount token volume ServiceAccount admission adds
// (kube-api-access-*).
func hasProjectedToken(pod *corev1.Pod) bool {
	for _, v := range pod.Spec.Volumes {
		if strings.HasPrefix(v.Name, "kube-api-access-") && v.Projected != nil {
			return true
		}
	}
	return false
}

func fileData(t *testing.T, files []ociimage.File, p string) []byte {
	t.Helper()
	data, err := ociimage.FileData(files, p)
	require.NoError(t, err)
	return data
}

// imagePod runs the image once, without a service account token, with the chart's container security context.
func imagePod(ns, name, image string, args ...string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: corev1.PodSpec{
			RestartPolicy:                 corev1.RestartPolicyNever,
			TerminationGracePeriodSeconds: ptr.To[int64](1),
			AutomountServiceAccountToken:  ptr.To(false),
			Containers: []corev1.Container{{
				Name: "syncmedic", Image: image, ImagePullPolicy: corev1.PullNever, Args: args,
				SecurityContext: &corev1.SecurityContext{AllowPrivilegeEscalation: ptr.To(false),
					ReadOnlyRootFilesystem: ptr.To(true),
					Capabilities:           &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}}},
			}},
		},
	}
}

// createPod creates pod and deletes it when the test ends.
func createPod(t *testing.T, n *testenv.Node, pod *corev1.Pod) {
	t.Helper()
	pods := n.Clientset.CoreV1().Pods(pod.Namespace)
	_, err := pods.Create(context.Background(), pod, metav1.CreateOptions{})
	require.NoError(t, err)
	t.Cleanup(func() {
		_ = pods.Delete(context.Background(), pod.Name, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)})
	})
}

// waitPod polls the pod until done says so; it fails with the pod's status and logs on an error or after 3 minutes
// (Pods start in seconds, but the machine is shared).
func waitPod(t *testing.T, n *testenv.Node, pod *corev1.Pod, done func(*corev1.Pod) (bool, error)) {
	t.Helper()
	deadline := time.Now().Add(3 * time.Minute)
	for {
		p, err := n.Clientset.CoreV1().Pods(pod.Namespace).Get(context.Background(), pod.Name, metav1.GetOptions{})
		require.NoError(t, err)
		ok, err := done(p)
		if err == nil && !ok && time.Now().After(deadline) {
			err = fmt.Errorf("not done after 3m: %+v", p.Status)
		}
		if err != nil {
			logs, _ := n.Clientset.CoreV1().Pods(pod.Namespace).GetLogs(pod.Name, &corev1.PodLogOptions{}).DoRaw(context.Background())
			t.Fatalf("pod %s: %v\nlogs:\n%s", pod.Name, err, logs)
		}
		if ok {
			return
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func podLogs(t *testing.T, n *testenv.Node, pod *corev1.Pod) string {
	t.Helper()
	logs, err := n.Clientset.CoreV1().Pods(pod.Namespace).GetLogs(pod.Name, &corev1.PodLogOptions{}).DoRaw(context.Background())
	require.NoError(t, err)
	return string(logs)
}
