package testenv

import (
	"bytes"
	"context"
	_ "embed"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/syncmedic/syncmedic/internal/ociimage"
)

// ArgoCDPodVersion is the Argo CD release Node.InstallArgoCD runs as Pods, from its module's manifests/install.yaml
// (bin/argocd-install-<version>.yaml, copied by hack/argocd-tools.sh) and its multi-call binary bin/argocd-<version>.
const ArgoCDPodVersion = "v3.6.1"

// ArgoCDNamespace is where InstallArgoCD applies install.yaml, as Argo CD's getting-started guide does
// (`kubectl create namespace argocd; kubectl apply -n argocd -f install.yaml`).
const ArgoCDNamespace = "argocd"

// ArgoCDImage is the image install.yaml runs every Argo CD component from; the node's containerd holds it under
// that name, built here (argoCDImage), never pulled.
const ArgoCDImage = "quay.io/argoproj/argocd:" + ArgoCDPodVersion

// ExtensionInstallerImage is the image of Argo CD's extension installer, which manifests/components/argocd-extension
// runs as argocd-server's init container; InstallArgoCD builds it (extensionInstallerImage).
const ExtensionInstallerImage = "quay.io/argoprojlabs/argocd-extension-installer:v0.0.8"

// extensionInstallerScript is the installer's install.sh at v0.0.8, vendored (extinstaller/README.md).
//
//go:embed extinstaller/install.sh
var extensionInstallerScript []byte

// argoCDLeftOut names the objects of install.yaml InstallArgoCD does not apply: Dex (its image,
// ghcr.io/dexidp/dex, is built from another project's module, and nothing here logs in through SSO; argocd-server
// runs without it when argocd-cm configures no dex.config, as a fresh install does).
func argoCDLeftOut(o *unstructured.Unstructured) bool {
	return strings.HasPrefix(o.GetName(), "argocd-dex-server")
}

// argoCDUser is the user of Argo CD's upstream image (useradd -u 999 argocd; USER 999 in its Dockerfile): most of
// install.yaml's containers ask for runAsNonRoot without a runAsUser.
const argoCDUser = "999"

// InstallArgoCD runs Argo CD ArgoCDPodVersion as Pods on the node, from its module's manifests/install.yaml applied
// to ArgoCDNamespace with two changes, both what an air-gapped install makes: Dex left out (argoCDLeftOut), and
// imagePullPolicy Always made IfNotPresent (Always makes the kubelet ask quay.io for the tag's digest on every
// start, and nothing leaves this machine; the images are in the node's containerd under their upstream names).
// The images are built here: quay.io/argoproj/argocd from `make tools`' argocd binary with the files Argo CD's
// Dockerfile installs from Debian packages (git, tini, gpg, gpg-agent, ca-certificates; busybox-static for the
// init containers' sh and cp) taken from this machine's packages, and the Redis image from Debian's redis-server.
// It returns once every Deployment and the application controller's StatefulSet are ready. The node keeps them
// until it stops.
func (n *Node) InstallArgoCD(t testing.TB) {
	t.Helper()
	n.argoCDOnce.Do(func() { n.argoCDErr = n.installArgoCD() })
	if n.argoCDErr != nil {
		t.Fatalf("testenv: installing Argo CD as Pods: %v", n.argoCDErr)
	}
}

func (n *Node) installArgoCD() error {
	bin, err := BinDir()
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	dir, err := os.MkdirTemp(n.Dir, "argocd-")
	if err != nil {
		return err
	}
	objs, err := ArgoCDUpstreamManifests(bin, dir)
	if err != nil {
		return err
	}
	images := map[string]bool{}
	for _, o := range objs {
		for _, img := range podImages(o) {
			images[img] = true
		}
	}
	for img := range images {
		var built ociImage
		switch {
		case img == ArgoCDImage:
			built, err = argoCDImage(ctx, bin)
		case strings.Contains(img, "/redis:"):
			var redis string
			if redis, err = redisPath(); err == nil {
				built, err = hostBinaryImage(ctx, img, redis, "/usr/local/bin/redis-server", argoCDUser)
			}
		default:
			err = fmt.Errorf("install.yaml runs %s, which nothing here builds", img)
		}
		if err != nil {
			return fmt.Errorf("the image %s: %w", img, err)
		}
		if err := n.importImage(ctx, filepath.Base(strings.ReplaceAll(img, ":", "-"))+".tar", built.Tar); err != nil {
			return err
		}
	}
	installer, err := extensionInstallerImage(ctx)
	if err != nil {
		return fmt.Errorf("the image %s: %w", ExtensionInstallerImage, err)
	}
	if err := n.importImage(ctx, "argocd-extension-installer.tar", installer.Tar); err != nil {
		return err
	}
	if err := n.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ArgoCDNamespace}}); err != nil {
		return err
	}
	return n.applyAndWait(ctx, objs, ArgoCDNamespace, 5*time.Minute)
}

// ArgoCDUpstreamManifests returns the objects of ArgoCDPodVersion's install.yaml (in bin, copied there by `make
// tools`), with the kustomize components at the absolute paths components (as a user's Argo CD kustomization has
// them: `resources: [install.yaml]`, `components: [...]`), built with kustomize under dir, and InstallArgoCD's two
// changes: without argoCDLeftOut's objects, and no imagePullPolicy Always.
func ArgoCDUpstreamManifests(bin, dir string, components ...string) ([]*unstructured.Unstructured, error) {
	p := filepath.Join(bin, "argocd-install-"+ArgoCDPodVersion+".yaml")
	raw, err := os.ReadFile(p)
	if err != nil {
		return nil, fmt.Errorf("%w: run `make tools` (hack/argocd-tools.sh copies the module's manifests/install.yaml)", err)
	}
	if err := os.WriteFile(filepath.Join(dir, "install.yaml"), raw, 0o600); err != nil {
		return nil, err
	}
	k := "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources:\n- install.yaml\n"
	if len(components) > 0 {
		k += "components:\n"
		for _, c := range components {
			rel, err := filepath.Rel(dir, c) // kustomize takes no absolute path
			if err != nil {
				return nil, err
			}
			k += "- " + rel + "\n"
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "kustomization.yaml"), []byte(k), 0o600); err != nil {
		return nil, err
	}
	objs, err := KustomizeBuild(dir)
	if err != nil {
		return nil, fmt.Errorf("kustomize build of install.yaml with %v: %w", components, err)
	}
	var out []*unstructured.Unstructured
	for _, o := range objs {
		if argoCDLeftOut(o) {
			continue
		}
		for _, field := range []string{"containers", "initContainers"} {
			cs, found, _ := unstructured.NestedSlice(o.Object, "spec", "template", "spec", field)
			if !found {
				continue
			}
			for _, c := range cs {
				if m, ok := c.(map[string]any); ok && m["imagePullPolicy"] == "Always" {
					m["imagePullPolicy"] = "IfNotPresent"
				}
			}
			if err := unstructured.SetNestedSlice(o.Object, cs, "spec", "template", "spec", field); err != nil {
				return nil, err
			}
		}
		out = append(out, o)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%s holds no objects", p)
	}
	return out, nil
}

// ApplyArgoCD applies InstallArgoCD's install.yaml again with the kustomize components at the absolute paths
// components (server-side, so only what they change changes), and waits until every Deployment and the
// StatefulSet are rolled out and ready again. InstallArgoCD must have run.
func (n *Node) ApplyArgoCD(t testing.TB, components ...string) {
	t.Helper()
	if err := n.applyArgoCD(components...); err != nil {
		t.Fatalf("testenv: applying Argo CD with %v: %v", components, err)
	}
}

func (n *Node) applyArgoCD(components ...string) error {
	bin, err := BinDir()
	if err != nil {
		return err
	}
	dir, err := os.MkdirTemp(n.Dir, "argocd-")
	if err != nil {
		return err
	}
	objs, err := ArgoCDUpstreamManifests(bin, dir, components...)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	return n.applyAndWait(ctx, objs, ArgoCDNamespace, 5*time.Minute)
}

// podImages lists the images of a workload's Pod template.
func podImages(o *unstructured.Unstructured) []string {
	var out []string
	for _, field := range []string{"containers", "initContainers"} {
		cs, _, _ := unstructured.NestedSlice(o.Object, "spec", "template", "spec", field)
		for _, c := range cs {
			if m, ok := c.(map[string]any); ok {
				if img, ok := m["image"].(string); ok {
					out = append(out, img)
				}
			}
		}
	}
	return out
}

// waitStatefulSetReady waits until the StatefulSet ns/name has all its replicas updated and ready.
func (n *Node) waitStatefulSetReady(ns, name string, within time.Duration) error {
	deadline := time.Now().Add(within)
	for {
		var s appsv1.StatefulSet
		err := n.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, &s)
		if err == nil && s.Spec.Replicas != nil && s.Status.ObservedGeneration >= s.Generation &&
			s.Status.UpdatedReplicas == *s.Spec.Replicas && s.Status.ReadyReplicas == *s.Spec.Replicas {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the StatefulSet %s/%s is not ready after %s (%v): %+v\nkubelet log:\n%s", ns, name, within, err,
				s.Status, tail(n.KubeletLog, 20))
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// argoCDDebianPackages are the packages Argo CD's Dockerfile installs that its components run (git for the
// repo-server's fetches, gpg and gpg-agent for the keyring it initialises at start, tini as PID 1,
// ca-certificates), taken from this machine (`make tools` installs them). tzdata, connect-proxy and openssh-client
// are left out: nothing here uses time zones, a proxy or ssh repositories.
var argoCDDebianPackages = []string{"git", "gpg", "gpg-agent", "gpgconf", "tini", "ca-certificates"}

// argoCDImage builds ArgoCDImage as Argo CD's Dockerfile lays it out: the multi-call binary in /usr/local/bin with
// a link per component, the hack/ wrappers beside it, the Debian packages' files (argoCDDebianPackages) with the
// shared libraries their programs load, busybox as /bin/sh and /bin/cp (Ubuntu's coreutils upstream), user 999
// (argocd, home /home/argocd) and tini as the entrypoint.
func argoCDImage(ctx context.Context, bin string) (ociImage, error) {
	argocd, err := os.ReadFile(filepath.Join(bin, "argocd-"+ArgoCDPodVersion))
	if err != nil {
		return ociImage{}, fmt.Errorf("%w: run `make tools`", err)
	}
	files := []imageFile{{Path: "usr/local/bin/argocd", Data: argocd, Mode: 0o755}}
	for _, c := range []string{"server", "repo-server", "cmp-server", "application-controller", "dex", "notifications",
		"applicationset-controller", "k8s-auth", "commit-server"} {
		files = append(files, imageFile{Path: "usr/local/bin/argocd-" + c, Link: "/usr/local/bin/argocd"})
	}
	hack := filepath.Join(bin, "argocd-"+ArgoCDPodVersion+"-hack")
	for _, w := range []string{"gpg-wrapper.sh", "git-verify-wrapper.sh"} {
		b, err := os.ReadFile(filepath.Join(hack, w))
		if err != nil {
			return ociImage{}, fmt.Errorf("%w: run `make tools`", err)
		}
		files = append(files, imageFile{Path: "usr/local/bin/" + w, Data: b, Mode: 0o755})
	}
	pkgFiles, err := debianPackageFiles(ctx, argoCDDebianPackages...)
	if err != nil {
		return ociImage{}, err
	}
	files = append(files, pkgFiles...)
	busybox, err := os.ReadFile(busyboxPath)
	if err != nil {
		return ociImage{}, fmt.Errorf("reading %s (Debian package busybox-static, installed by `make tools`): %w", busyboxPath, err)
	}
	files = append(files, imageFile{Path: "bin/busybox", Data: busybox, Mode: 0o755})
	for _, applet := range []string{"sh", "cp", "ln", "cat", "ls"} {
		files = append(files, imageFile{Path: "bin/" + applet, Link: "busybox"})
	}
	user := func(path string, mode int64) imageFile {
		return imageFile{Path: path, Dir: true, Mode: mode, UID: 999, GID: 999}
	}
	files = append(files,
		imageFile{Path: "etc/passwd", Mode: 0o644, Data: []byte("root:x:0:0:root:/root:/bin/sh\n" +
			"argocd:x:999:999::/home/argocd:/bin/sh\nnobody:x:65534:65534:nobody:/nonexistent:/bin/false\n")},
		imageFile{Path: "etc/group", Mode: 0o644, Data: []byte("root:x:0:\nargocd:x:999:\nnogroup:x:65534:\n")},
		user("home/argocd", 0o755),
		imageFile{Path: "app/config/ssh/ssh_known_hosts", Mode: 0o644, Data: []byte{}},
		imageFile{Path: "etc/ssh/ssh_known_hosts", Link: "/app/config/ssh/ssh_known_hosts"},
		imageFile{Path: "app/config/tls", Dir: true, Mode: 0o755},
		imageFile{Path: "app/config/gpg/source", Dir: true, Mode: 0o755},
		user("app/config/gpg/keys", 0o700),
		imageFile{Path: "tmp", Dir: true, Mode: 0o1777},
	)
	for _, d := range rootDirs {
		files = append(files, imageFile{Path: d, Dir: true, Mode: 0o755})
	}
	files = ociimage.WithParents(dedupeFiles(files))
	return buildOCIImageWith(ArgoCDImage, files, ociimage.Config{User: argoCDUser,
		Env: []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "USER=argocd",
			"GRPC_ENABLE_TXT_SERVICE_CONFIG=false"},
		Entrypoint: []string{"/usr/bin/tini", "--"}, WorkingDir: "/home/argocd",
		CreatedBy: "syncmedic internal/testenv argoCDImage"})
}

// extensionInstallerImage builds ExtensionInstallerImage as its Dockerfile lays it out (Alpine with curl, file and
// jq; user ext-installer; ./install.sh in its home as the entrypoint): the vendored install.sh, busybox for the
// shell and the utilities it calls, and the Debian packages curl, file (with libmagic's database) and jq from this
// machine, with the libraries they load. The component runs it as user 1000, the Dockerfile's adduser's.
func extensionInstallerImage(ctx context.Context) (ociImage, error) {
	files, err := debianPackageFiles(ctx, "curl", "file", "libmagic-mgc", "jq")
	if err != nil {
		return ociImage{}, err
	}
	busybox, err := busyboxFiles(ctx, busyboxPath)
	if err != nil {
		return ociImage{}, err
	}
	files = append(append(files, busybox...),
		imageFile{Path: "etc/passwd", Mode: 0o644, Data: []byte("root:x:0:0:root:/root:/bin/sh\n" +
			"ext-installer:x:1000:1000::/home/ext-installer:/bin/sh\n")},
		imageFile{Path: "etc/group", Mode: 0o644, Data: []byte("root:x:0:\next-installer:x:1000:\n")},
		imageFile{Path: "home/ext-installer", Dir: true, Mode: 0o755, UID: 1000, GID: 1000},
		imageFile{Path: "home/ext-installer/install.sh", Data: extensionInstallerScript, Mode: 0o755},
		imageFile{Path: "tmp", Dir: true, Mode: 0o1777},
	)
	for _, d := range rootDirs {
		files = append(files, imageFile{Path: d, Dir: true, Mode: 0o755})
	}
	files = ociimage.WithParents(dedupeFiles(files))
	return buildOCIImageWith(ExtensionInstallerImage, files, ociimage.Config{User: "1000",
		Env:        []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "HOME=/home/ext-installer"},
		Entrypoint: []string{"./install.sh"}, WorkingDir: "/home/ext-installer",
		CreatedBy: "syncmedic internal/testenv extensionInstallerImage"})
}

// debianPackageFiles returns the files the installed Debian packages pkgs hold (`dpkg -L`), documentation and
// translations left out, with the shared libraries their ELF programs load: a regular file as its content, a
// symbolic link as the link, a second name of a hard link as a link to the first.
func debianPackageFiles(ctx context.Context, pkgs ...string) ([]imageFile, error) {
	var files []imageFile
	seen := map[string]bool{}
	inodes := map[uint64]string{}
	libs := map[string]bool{}
	skip := []string{"/usr/share/doc", "/usr/share/man", "/usr/share/locale", "/usr/share/info", "/usr/share/lintian",
		"/usr/share/bash-completion", "/usr/share/perl5", "/usr/share/gitweb", "/usr/share/git-gui", "/usr/share/gitk"}
	for _, pkg := range pkgs {
		out, err := exec.CommandContext(ctx, "dpkg", "-L", pkg).Output()
		if err != nil {
			return nil, fmt.Errorf("dpkg -L %s (a Debian package `make tools` installs): %w", pkg, err)
		}
	paths:
		for _, p := range strings.Split(strings.TrimSpace(string(out)), "\n") {
			for _, s := range skip {
				if p == s || strings.HasPrefix(p, s+"/") {
					continue paths
				}
			}
			if seen[p] || p == "/." || p == "" {
				continue
			}
			seen[p] = true
			fi, err := os.Lstat(p)
			if err != nil {
				continue // a diverted or removed conffile
			}
			rel := strings.TrimPrefix(p, "/")
			switch {
			case fi.IsDir():
				files = append(files, imageFile{Path: rel, Dir: true, Mode: int64(fi.Mode().Perm())})
			case fi.Mode()&os.ModeSymlink != 0:
				target, err := os.Readlink(p)
				if err != nil {
					return nil, err
				}
				files = append(files, imageFile{Path: rel, Link: target})
			case fi.Mode().IsRegular():
				if st, ok := fi.Sys().(*syscall.Stat_t); ok && st.Nlink > 1 {
					if first, ok := inodes[st.Ino]; ok {
						files = append(files, imageFile{Path: rel, Link: "/" + first})
						continue
					}
					inodes[st.Ino] = rel
				}
				data, err := os.ReadFile(p)
				if err != nil {
					return nil, err
				}
				files = append(files, imageFile{Path: rel, Data: data, Mode: int64(fi.Mode().Perm())})
				if bytes.HasPrefix(data, []byte("\x7fELF")) {
					l, err := sharedLibraries(ctx, p)
					if err != nil {
						return nil, err
					}
					for _, lib := range l {
						libs[lib] = true
					}
				}
			}
		}
	}
	sorted := make([]string, 0, len(libs))
	for lib := range libs {
		sorted = append(sorted, lib)
	}
	sort.Strings(sorted)
	for _, lib := range sorted {
		if seen[lib] {
			continue
		}
		data, err := os.ReadFile(lib)
		if err != nil {
			return nil, err
		}
		files = append(files, imageFile{Path: strings.TrimPrefix(lib, "/"), Data: data, Mode: 0o755})
	}
	return files, nil
}

// dedupeFiles keeps the first entry of every path (a package's directory and one of rootDirs, say).
func dedupeFiles(files []imageFile) []imageFile {
	seen := map[string]bool{}
	out := files[:0]
	for _, f := range files {
		p := strings.TrimSuffix(f.Path, "/")
		if seen[p] {
			continue
		}
		seen[p] = true
		out = append(out, f)
	}
	return out
}

// ServeGitRepo serves repo's repository from a Pod in ns: `git daemon` of ArgoCDImage (InstallArgoCD first) over
// the git protocol, the repository mounted from the host by a hostPath volume, behind the Service "git". It returns
// the repository's URL, git://git.<ns>.svc.cluster.local/repo, which Argo CD's repo-server clones by the Service's
// DNS name; commits made to repo afterwards are served at once.
func (n *Node) ServeGitRepo(t testing.TB, ns string, repo *GitRepo) string {
	t.Helper()
	ctx := context.Background()
	core := n.Clientset.CoreV1()
	labels := map[string]string{"app": "git"}
	_, err := core.Pods(ns).Create(ctx, &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "git", Labels: labels},
		Spec: corev1.PodSpec{
			TerminationGracePeriodSeconds: ptr.To[int64](1),
			// root reads the repository, owned by root on the host (git refuses another owner's repository).
			SecurityContext: &corev1.PodSecurityContext{RunAsUser: ptr.To[int64](0)},
			Containers: []corev1.Container{{Name: "git", Image: ArgoCDImage, ImagePullPolicy: corev1.PullNever,
				Command: []string{"git", "daemon", "--export-all", "--reuseaddr", "--base-path=/srv", "--port=9418", "--verbose", "/srv"},
				Ports:   []corev1.ContainerPort{{ContainerPort: 9418}},
				ReadinessProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{Port: intstr.FromInt32(9418)}},
					PeriodSeconds: 1},
				VolumeMounts: []corev1.VolumeMount{{Name: "repo", MountPath: "/srv/repo", ReadOnly: true}}}},
			Volumes: []corev1.Volume{{Name: "repo", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{
				Path: repo.Dir, Type: ptr.To(corev1.HostPathDirectory)}}}},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("testenv: the git server in %s: %v", ns, err)
	}
	svc, err := core.Services(ns).Create(ctx, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "git"},
		Spec: corev1.ServiceSpec{Selector: labels, Ports: []corev1.ServicePort{{Port: 9418, TargetPort: intstr.FromInt32(9418)}}}},
		metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("testenv: the git Service in %s: %v", ns, err)
	}
	deadline := time.Now().Add(2 * time.Minute)
	for {
		p, err := core.Pods(ns).Get(ctx, "git", metav1.GetOptions{})
		if err == nil && len(p.Status.ContainerStatuses) == 1 && p.Status.ContainerStatuses[0].Ready {
			// Ready, among its Service's ready endpoints, and its name resolved by the cluster's DNS (a repo-server
			// that finds no server keeps the error until the application's next refresh, minutes later).
			if err = n.serviceReady(ctx, svc); err == nil {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("testenv: the git server in %s is not ready (%v): %+v\nkubelet log:\n%s", ns, err, p.Status, tail(n.KubeletLog, 20))
		}
		time.Sleep(250 * time.Millisecond)
	}
	return "git://git." + ns + ".svc." + ClusterDomain + "/repo"
}

// WaitServiceReachable waits (up to two minutes) until Pods can reach the Service ns/name by its DNS name
// (serviceReady): a ready endpoint, CoreDNS's answer with its current ClusterIP, and kube-proxy's rule for it. A
// client that connects earlier gets "network is unreachable" or an old address, and some (Argo CD's repo-server,
// Flux's notification-controller) do not try again soon.
func (n *Node) WaitServiceReachable(t testing.TB, ns, name string) {
	t.Helper()
	ctx := context.Background()
	deadline := time.Now().Add(2 * time.Minute)
	for {
		svc, err := n.Clientset.CoreV1().Services(ns).Get(ctx, name, metav1.GetOptions{})
		if err == nil {
			err = n.serviceReady(ctx, svc)
		}
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("testenv: the Service %s/%s is not reachable from Pods: %v", ns, name, err)
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// serviceReady reports (as an error) whether svc is reachable by name from Pods: it has a ready endpoint, CoreDNS
// answers its name with its ClusterIP (queried inside the node's network namespace), and kube-proxy has its rule.
func (n *Node) serviceReady(ctx context.Context, svc *corev1.Service) error {
	slices, err := n.Clientset.DiscoveryV1().EndpointSlices(svc.Namespace).List(ctx,
		metav1.ListOptions{LabelSelector: discoveryv1.LabelServiceName + "=" + svc.Name})
	if err != nil {
		return err
	}
	ready := false
	for _, s := range slices.Items {
		for _, e := range s.Endpoints {
			ready = ready || e.Conditions.Ready == nil || *e.Conditions.Ready
		}
	}
	if !ready {
		return fmt.Errorf("the Service %s/%s has no ready endpoint", svc.Namespace, svc.Name)
	}
	name := svc.Name + "." + svc.Namespace + ".svc." + ClusterDomain + "."
	// DNS over TCP to CoreDNS on the node's address, each connection dialled inside the namespace (the resolver
	// queries A and AAAA from goroutines of its own, on threads outside it).
	r := &net.Resolver{PreferGo: true, Dial: func(context.Context, string, string) (net.Conn, error) {
		return dialInNetns(n.NetnsPath, net.JoinHostPort(n.IP, "53"))
	}}
	addrs, err := r.LookupHost(ctx, name)
	if err != nil {
		return err
	}
	if len(addrs) != 1 || addrs[0] != svc.Spec.ClusterIP {
		return fmt.Errorf("%s resolves to %v, not %s", name, addrs, svc.Spec.ClusterIP)
	}
	// kube-proxy's rule for the ClusterIP: until it syncs, a Pod's connection leaves by its default route and the
	// node answers "network is unreachable".
	rules, err := runIn(ctx, n.NetnsPath, "iptables", "-w", "-t", "nat", "-S", "KUBE-SERVICES")
	if err != nil {
		return err
	}
	if !strings.Contains(string(rules), "-d "+svc.Spec.ClusterIP+"/32 ") {
		return fmt.Errorf("kube-proxy has no rule for %s/%s's ClusterIP %s yet", svc.Namespace, svc.Name, svc.Spec.ClusterIP)
	}
	return nil
}
