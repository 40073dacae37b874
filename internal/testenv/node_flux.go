package testenv

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"

	"github.com/syncmedic/syncmedic/internal/ociimage"
)

// FluxPodController is a Flux controller Node.InstallFlux runs as a Pod: its binary from `make tools`
// (bin/<Binary>), in an image under the upstream name (Image), deployed from its module's config/ manifests
// (bin/config-<Name>-<Version>, copied by hack/flux-tools.sh) into FluxNamespace.
type FluxPodController struct {
	Name, Version, Binary string
}

// Image is the controller's upstream image name, which its config/manager kustomization sets (fluxcd/<name>:<tag>,
// docker.io implied): the node's containerd holds it under that name, so the kubelet never pulls it.
func (c FluxPodController) Image() string { return "docker.io/fluxcd/" + c.Name + ":" + c.Version }

// FluxNamespace is where InstallFlux runs the controllers, as `flux install` does.
const FluxNamespace = "flux-system"

// FluxPodControllers are the controllers InstallFlux runs.
var FluxPodControllers = []FluxPodController{
	{Name: "source-controller", Version: "v1.7.3", Binary: "source-controller"},
	{Name: "helm-controller", Version: "v1.4.3", Binary: "helm-controller-v1.4.3"},
	{Name: "notification-controller", Version: "v1.5.0", Binary: "notification-controller"},
}

// fluxEventsAddr is where the controllers post their events: notification-controller's event receiver, through
// its Service. Flux's own install (fluxcd/flux2 manifests/bases) adds this argument to the upstream Deployments;
// without it no Alert ever forwards anything.
const fluxEventsAddr = "http://notification-controller." + FluxNamespace + ".svc." + ClusterDomain + "./"

// fluxImageUser is the user of Flux's upstream images (USER 65534:65534 in their Dockerfiles): their Deployments
// ask for runAsNonRoot without a runAsUser, so the image must name a numeric non-root user.
const fluxImageUser = "65534:65534"

// InstallFlux runs Flux's source-, helm- and notification-controller as Pods on the node, installed from their
// modules' config/ manifests (CRDs, RBAC, Services, Deployments; applied server-side) into flux-system, with the
// one change Flux's own install makes to them (--events-addr, so their events reach notification-controller), from
// images built here from `make tools`' binaries and never pulled; it returns once every Deployment is available.
// The controllers reach the apiserver as their ServiceAccounts through the `kubernetes` Service, and one another by
// Service name. The node keeps them until it stops.
func (n *Node) InstallFlux(t testing.TB) {
	t.Helper()
	n.fluxOnce.Do(func() { n.fluxErr = n.installFlux() })
	if n.fluxErr != nil {
		t.Fatalf("testenv: installing Flux as Pods: %v", n.fluxErr)
	}
}

func (n *Node) installFlux() error {
	bin, err := BinDir()
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	for _, c := range FluxPodControllers {
		img, err := hostBinaryImage(ctx, c.Image(), filepath.Join(bin, c.Binary), "/usr/local/bin/"+c.Name, fluxImageUser)
		if err != nil {
			return fmt.Errorf("the %s image: %w", c.Name, err)
		}
		if err := n.importImage(ctx, c.Name+".tar", img.Tar); err != nil {
			return err
		}
	}
	dir, err := os.MkdirTemp(n.Dir, "flux-")
	if err != nil {
		return err
	}
	objs, err := fluxUpstreamManifests(bin, dir)
	if err != nil {
		return fmt.Errorf("building the upstream Flux manifests: %w", err)
	}
	return n.applyAndWait(ctx, objs, FluxNamespace, 3*time.Minute)
}

// applyAndWait applies objs server-side as the harness (Namespaces and CRDs first, as `kubectl apply` orders them:
// kustomize keeps the manifests' order; a namespaced object without a namespace goes into ns, as `kubectl apply -n`
// puts it), then waits (up to within for each) until each of their Deployments and StatefulSets is rolled out and
// ready.
func (n *Node) applyAndWait(ctx context.Context, objs []*unstructured.Unstructured, ns string, within time.Duration) error {
	first := func(o *unstructured.Unstructured) bool {
		return o.GetKind() == "Namespace" || o.GetKind() == "CustomResourceDefinition"
	}
	sort.SliceStable(objs, func(i, j int) bool { return first(objs[i]) && !first(objs[j]) })
	for _, o := range objs {
		if o.GetNamespace() == "" {
			namespaced, err := n.Client.IsObjectNamespaced(o)
			if err != nil {
				return fmt.Errorf("%s %s: %w", o.GetKind(), o.GetName(), err)
			}
			if namespaced {
				o.SetNamespace(ns)
			}
		}
		if err := n.Client.Patch(ctx, o, client.Apply, client.FieldOwner("syncmedic-testenv"), client.ForceOwnership); err != nil {
			return fmt.Errorf("applying %s %s/%s: %w", o.GetKind(), o.GetNamespace(), o.GetName(), err)
		}
	}
	for _, o := range objs {
		var err error
		switch o.GetKind() {
		case "Deployment":
			err = n.waitDeploymentAvailable(o.GetNamespace(), o.GetName(), within)
		case "StatefulSet":
			err = n.waitStatefulSetReady(o.GetNamespace(), o.GetName(), within)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// fluxUpstreamManifests builds the controllers' manifests with kustomize (the library kubectl uses) from a
// kustomization written under dir: each controller's config/crd, config/rbac and config/manager in flux-system
// (their config/default would put each in a namespace of its own, and helm-controller's also pulls
// source-controller's release manifests from GitHub), the flux-system Namespace, and --events-addr for the
// controllers that post events.
func fluxUpstreamManifests(bin, dir string) ([]*unstructured.Unstructured, error) {
	top := []string{"namespace.yaml"}
	for _, c := range FluxPodControllers {
		config := filepath.Join(bin, "config-"+c.Name+"-"+c.Version)
		if _, err := os.Stat(filepath.Join(config, "manager", "kustomization.yaml")); err != nil {
			return nil, fmt.Errorf("%s's config/ is not in bin/: run `make tools` (%w)", c.Name, err)
		}
		sub := filepath.Join(dir, c.Name)
		if err := os.MkdirAll(sub, 0o700); err != nil {
			return nil, err
		}
		k := "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nnamespace: " + FluxNamespace + "\nresources:\n"
		for _, d := range []string{"crd", "rbac", "manager"} {
			rel, err := filepath.Rel(sub, filepath.Join(config, d))
			if err != nil {
				return nil, err
			}
			k += "- " + rel + "\n"
		}
		if c.Name != "notification-controller" {
			k += "patches:\n- target: {kind: Deployment, name: " + c.Name + "}\n  patch: |-\n" +
				"    - op: add\n      path: /spec/template/spec/containers/0/args/-\n      value: --events-addr=" + fluxEventsAddr + "\n"
		}
		if err := os.WriteFile(filepath.Join(sub, "kustomization.yaml"), []byte(k), 0o600); err != nil {
			return nil, err
		}
		top = append(top, c.Name)
	}
	files := map[string]string{
		"namespace.yaml":     "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: " + FluxNamespace + "\n",
		"kustomization.yaml": "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources:\n- " + strings.Join(top, "\n- ") + "\n",
	}
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o600); err != nil {
			return nil, err
		}
	}
	return KustomizeBuild(dir)
}

// KustomizeBuild runs kustomize (krusty, the library kubectl uses) on the kustomization in dir and returns its
// objects in kustomize's order.
func KustomizeBuild(dir string) ([]*unstructured.Unstructured, error) {
	m, err := krusty.MakeKustomizer(krusty.MakeDefaultOptions()).Run(filesys.MakeFsOnDisk(), dir)
	if err != nil {
		return nil, err
	}
	var out []*unstructured.Unstructured
	for _, r := range m.Resources() {
		js, err := r.MarshalJSON()
		if err != nil {
			return nil, err
		}
		u := &unstructured.Unstructured{}
		if err := u.UnmarshalJSON(js); err != nil {
			return nil, err
		}
		out = append(out, u)
	}
	return out, nil
}

// waitDeploymentAvailable waits until the Deployment ns/name has all its replicas updated and available, and no
// Pod of an older template left (a rollout's surge Pod available beside the old one is not the end of it).
func (n *Node) waitDeploymentAvailable(ns, name string, within time.Duration) error {
	deadline := time.Now().Add(within)
	for {
		var d appsv1.Deployment
		err := n.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, &d)
		if err == nil && d.Spec.Replicas != nil && d.Status.ObservedGeneration >= d.Generation && d.Status.Replicas == *d.Spec.Replicas &&
			d.Status.UpdatedReplicas == *d.Spec.Replicas && d.Status.AvailableReplicas == *d.Spec.Replicas {
			return nil
		}
		if time.Now().After(deadline) {
			pods, _ := n.Clientset.CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{})
			var states []string
			for _, p := range pods.Items {
				states = append(states, fmt.Sprintf("%s %s %+v", p.Name, p.Status.Phase, p.Status.ContainerStatuses))
				logs, _ := n.Clientset.CoreV1().Pods(ns).GetLogs(p.Name, &corev1.PodLogOptions{TailLines: ptr.To[int64](20)}).DoRaw(context.Background())
				states = append(states, string(logs))
			}
			return fmt.Errorf("the Deployment %s/%s is not available after %s (%v): %+v\n%s\nkubelet log:\n%s", ns, name, within, err,
				d.Status, strings.Join(states, "\n"), tail(n.KubeletLog, 20))
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// hostBinaryImage builds the image name holding the host's binary at binPath as dest (its entrypoint), with the
// shared libraries it loads (as `ldd` lists them: `make tools` builds the Flux controllers with cgo, as the Go
// command does by default, so they need the host's glibc), running as user. Same binary and libraries, same digest.
func hostBinaryImage(ctx context.Context, name, binPath, dest, user string) (ociImage, error) {
	data, err := os.ReadFile(binPath)
	if err != nil {
		return ociImage{}, fmt.Errorf("%w: run `make tools` first", err)
	}
	files := []imageFile{{Path: strings.TrimPrefix(dest, "/"), Data: data, Mode: 0o755}}
	libs, err := sharedLibraries(ctx, binPath)
	if err != nil {
		return ociImage{}, err
	}
	for _, lib := range libs {
		b, err := os.ReadFile(lib)
		if err != nil {
			return ociImage{}, err
		}
		files = append(files, imageFile{Path: strings.TrimPrefix(lib, "/"), Data: b, Mode: 0o755})
	}
	for _, d := range rootDirs {
		files = append(files, imageFile{Path: d, Dir: true, Mode: 0o755})
	}
	files = ociimage.WithParents(files)
	return buildOCIImageWith(name, files, ociimage.Config{User: user, Env: []string{"PATH=/usr/local/bin:/bin"},
		Entrypoint: []string{dest}, CreatedBy: "syncmedic internal/testenv hostBinaryImage"})
}

// sharedLibraries lists the absolute paths of the shared libraries binPath loads, its interpreter included, as
// `ldd` prints them; none for a static binary.
func sharedLibraries(ctx context.Context, binPath string) ([]string, error) {
	out, err := exec.CommandContext(ctx, "ldd", binPath).CombinedOutput()
	if err != nil {
		if strings.Contains(string(out), "not a dynamic executable") {
			return nil, nil
		}
		return nil, fmt.Errorf("ldd %s: %w\n%s", binPath, err, out)
	}
	var libs []string
	sc := bufio.NewScanner(strings.NewReader(string(out)))
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		for _, f := range fields {
			if strings.HasPrefix(f, "/") {
				libs = append(libs, f)
				break
			}
		}
		if len(fields) > 2 && fields[1] == "=>" && fields[2] == "not" {
			return nil, fmt.Errorf("ldd %s: %s", binPath, sc.Text())
		}
	}
	sort.Strings(libs)
	return libs, nil
}
