package install

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/syncmedic/syncmedic/internal/testenv"
)

// argoCDApp is an Application of the default project syncing path app of the repository at url into ns.
func argoCDApp(name, url, ns string, automated bool) *unstructured.Unstructured {
	spec := map[string]any{
		"project":     "default",
		"source":      map[string]any{"repoURL": url, "path": "app", "targetRevision": "main"},
		"destination": map[string]any{"server": "https://kubernetes.default.svc", "namespace": ns},
	}
	if automated {
		spec["syncPolicy"] = map[string]any{"automated": map[string]any{}}
	}
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "argoproj.io/v1alpha1", "kind": "Application",
		"metadata": map[string]any{"name": name, "namespace": testenv.ArgoCDNamespace},
		"spec":     spec,
	}}
}

// hookJob is a Job manifest Argo CD runs as a hook of phase (PreSync, Sync, ...) from the node's busybox image,
// running command with sh.
func hookJob(name, phase, command string) string {
	return fmt.Sprintf(`apiVersion: batch/v1
kind: Job
metadata:
  name: %s
  annotations:
    argocd.argoproj.io/hook: %s
spec:
  backoffLimit: 0
  template:
    spec:
      restartPolicy: Never
      terminationGracePeriodSeconds: 1
      containers:
      - name: hook
        image: %s
        imagePullPolicy: Never
        command: ["sh", "-c", %q]
`, name, phase, testenv.NodeBusyboxImage, command)
}

// TestArgoCDRunsAsPodsFromItsUpstreamManifests installs Argo CD v3.6.1 as Pods from its module's install.yaml
// (Node.InstallArgoCD), then has it sync an application end to end inside the cluster: the repo-server Pod clones a
// repository from a git server Pod by its Service's DNS name, the application-controller Pod (through Redis and the
// repo-server's Service) syncs it with a PreSync hook Job the node runs, and argocd-server answers its API through
// its Service.
func TestArgoCDRunsAsPodsFromItsUpstreamManifests(t *testing.T) {
	n := testenv.RealNode(t)
	n.InstallArgoCD(t)
	t.Logf("%s Argo CD installed", time.Now().Format(time.TimeOnly))
	ns := n.Namespace(t)
	ctx := context.Background()
	core := n.Clientset.CoreV1()

	repo := testenv.NewGitRepo(t)
	repo.Write(t, "app/configmap.yaml", "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: settings\ndata:\n  color: blue\n")
	repo.Write(t, "app/presync.yaml", hookJob("migrate", "PreSync", "true"))
	head := repo.Commit(t, "the application")
	url := n.ServeGitRepo(t, ns, repo)
	t.Logf("%s git server ready", time.Now().Format(time.TimeOnly))

	app := argoCDApp(ns, url, ns, true)
	require.NoError(t, n.Client.Create(ctx, app))
	last := ""
	poll(t, "the application synced and healthy", func() (bool, error) {
		if err := n.Client.Get(ctx, client.ObjectKeyFromObject(app), app); err != nil {
			return false, err
		}
		sync, _, _ := unstructured.NestedString(app.Object, "status", "sync", "status")
		health, _, _ := unstructured.NestedString(app.Object, "status", "health", "status")
		phase, _, _ := unstructured.NestedString(app.Object, "status", "operationState", "phase")
		revision, _, _ := unstructured.NestedString(app.Object, "status", "operationState", "syncResult", "revision")
		conditions, _, _ := unstructured.NestedSlice(app.Object, "status", "conditions")
		state := fmt.Sprintf("sync %q, health %q, operation %q at %q, conditions %v", sync, health, phase, revision, conditions)
		if state != last {
			t.Logf("%s %s", time.Now().Format(time.TimeOnly), state)
			last = state
		}
		return sync == "Synced" && health == "Healthy" && phase == "Succeeded" && revision == head, errors.New(state)
	})
	cm, err := core.ConfigMaps(ns).Get(ctx, "settings", metav1.GetOptions{})
	require.NoError(t, err)
	require.Equal(t, map[string]string{"color": "blue"}, cm.Data)
	results, _, _ := unstructured.NestedSlice(app.Object, "status", "operationState", "syncResult", "resources")
	var hooks []string
	for _, r := range results {
		m := r.(map[string]any)
		if m["hookType"] != nil {
			hooks = append(hooks, fmt.Sprintf("%s/%s %s %s", m["kind"], m["name"], m["hookType"], m["hookPhase"]))
		}
	}
	require.Equal(t, []string{"Job/migrate PreSync Succeeded"}, hooks)
	job, err := n.Clientset.BatchV1().Jobs(ns).Get(ctx, "migrate", metav1.GetOptions{})
	require.NoError(t, err)
	require.Equal(t, int32(1), job.Status.Succeeded, "the node ran the hook's container")

	// Every component runs the image built here under its upstream name, found in the node's containerd.
	pods, err := core.Pods(testenv.ArgoCDNamespace).List(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	components := map[string]bool{}
	for _, p := range pods.Items {
		components[p.Labels["app.kubernetes.io/name"]] = true
		for i, c := range p.Spec.Containers {
			st := p.Status.ContainerStatuses[i]
			require.True(t, st.Ready, "%s/%s", p.Name, c.Name)
			if strings.Contains(c.Image, "argocd") {
				require.Equal(t, testenv.ArgoCDImage, c.Image, p.Name)
				require.Equal(t, testenv.ArgoCDImage, st.Image, "%s: found in the node's containerd, never pulled", p.Name)
			}
		}
	}
	require.Equal(t, map[string]bool{"argocd-application-controller": true, "argocd-applicationset-controller": true,
		"argocd-notifications-controller": true, "argocd-redis": true, "argocd-repo-server": true, "argocd-server": true},
		components)

	// argocd-server serves its API (HTTPS, its own self-signed certificate) through its Service.
	raw, err := core.Services(testenv.ArgoCDNamespace).ProxyGet("https", "argocd-server", "443", "/api/version", nil).DoRaw(ctx)
	require.NoError(t, err, "%s", raw)
	var version struct{ Version string }
	require.NoError(t, json.Unmarshal(raw, &version), "%s", raw)
	require.True(t, strings.HasPrefix(version.Version, testenv.ArgoCDPodVersion+"+"), "argocd-server's version: %s", raw)
}

// issueSyncmedicToken runs the README's token commands ("The syncmedic Argo CD account") in work, as a user at a
// shell: `argocd` is the v3.6.1 CLI (the multi-call binary under that name), reaching argocd-server by port-forward
// through the apiserver (ARGOCD_OPTS, the CLI's documented default flags; --insecure for its self-signed
// certificate). The README's login is SSO, which this Argo CD does not have: the test logs in as admin with the
// initial password instead, and leaves out only that line. The account appears once argocd-server has re-read
// argocd-cm ("a few seconds"), so the test waits for `argocd account list` to show it first.
func issueSyncmedicToken(t *testing.T, n *testenv.Node, work string) {
	t.Helper()
	bin, err := testenv.BinDir()
	require.NoError(t, err)
	cli := t.TempDir()
	require.NoError(t, os.Symlink(filepath.Join(bin, "argocd-"+testenv.ArgoCDPodVersion), filepath.Join(cli, "argocd")))
	env := []string{"ARGOCD_OPTS=--port-forward --port-forward-namespace " + testenv.ArgoCDNamespace + " --insecure",
		"HOME=" + work, "PATH=" + cli + ":" + bin + ":" + os.Getenv("PATH")}
	login := `argocd login --username admin --password "$(kubectl -n argocd get secret argocd-initial-admin-secret -o jsonpath='{.data.password}' | base64 -d)"`
	listed := regexp.MustCompile(`(?m)^syncmedic\s+true\s+apiKey\s*$`)
	poll(t, "the syncmedic account in argocd-server", func() (bool, error) {
		out, err := shell(t, n, work, login+"\nargocd account list", env...)
		return err == nil && listed.MatchString(out), fmt.Errorf("%v: %s", err, out)
	})
	block := leaveOut(t, readmeBlock(t, readmeAccountSection, 1),
		func(code string) bool { return strings.HasPrefix(strings.TrimSpace(code), "argocd login ") },
		func([]string, int) int { return 0 },
		[]string{"argocd login argocd.example.com --sso"})
	t.Logf("token:\n%s", runShell(t, n, work, login+"\n"+block, env...))
	token, err := os.ReadFile(filepath.Join(work, "argocd-token"))
	require.NoError(t, err)
	require.Regexp(t, `^eyJ[\w-]+\.[\w-]+\.[\w-]+\n$`, string(token), "a JWT from argocd-server")
}

// checkStuckHookAnnounced has the real Argo CD sync an application whose PreSync hook never finishes (`sleep 3600`
// on the node), with the install's policy given a 20 s threshold for argocd/operation-stuck by setThreshold
// (instead of 30 min; then the Deployment restarted, as the README says for a threshold: kustomizeThreshold,
// helmThreshold), and waits until syncmedic
// announces it: the Kubernetes Event of a new incident on that
// Application, naming the rule, and no incident opened on anything else.
func checkStuckHookAnnounced(t *testing.T, n *testenv.Node, setThreshold func()) (app string) {
	t.Helper()
	ctx := context.Background()
	core := n.Clientset.CoreV1()
	start := time.Now().Add(-time.Second).Truncate(time.Second) // Events' times have whole seconds
	t.Cleanup(func() {
		if t.Failed() {
			logSyncmedic(t, n)
		}
	})
	setThreshold()

	ns := n.Namespace(t)
	repo := testenv.NewGitRepo(t)
	repo.Write(t, "app/configmap.yaml", "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: settings\ndata:\n  color: blue\n")
	repo.Write(t, "app/presync.yaml", hookJob("migrate", "PreSync", "sleep 3600"))
	repo.Commit(t, "a migration that never ends")
	application := argoCDApp(ns, n.ServeGitRepo(t, ns, repo), ns, true)
	require.NoError(t, n.Client.Create(ctx, application))
	t.Cleanup(func() { _ = n.Client.Delete(context.Background(), application) })
	poll(t, "the sync running its hook", func() (bool, error) {
		if err := n.Client.Get(ctx, client.ObjectKeyFromObject(application), application); err != nil {
			return false, err
		}
		phase, _, _ := unstructured.NestedString(application.Object, "status", "operationState", "phase")
		message, _, _ := unstructured.NestedString(application.Object, "status", "operationState", "message")
		return phase == "Running" && strings.Contains(message, "batch/Job/migrate"), fmt.Errorf("%s: %s", phase, message)
	})
	var opened []corev1.Event
	poll(t, "syncmedic's incident on the Application", func() (bool, error) {
		events, err := core.Events("").List(ctx, metav1.ListOptions{FieldSelector: "reason=SyncmedicIncidentOpened"})
		if err != nil {
			return false, err
		}
		opened = nil
		for _, e := range events.Items {
			if !e.CreationTimestamp.Time.Before(start) { // not another test's
				opened = append(opened, e)
			}
		}
		return len(opened) > 0, fmt.Errorf("no incident yet")
	})
	require.Len(t, opened, 1, "one incident, on the stuck application only: %+v", opened)
	e := opened[0]
	require.Equal(t, corev1.ObjectReference{APIVersion: "argoproj.io/v1alpha1", Kind: "Application",
		Namespace: testenv.ArgoCDNamespace, Name: ns, UID: application.GetUID()}, e.InvolvedObject)
	require.Contains(t, e.Message, "(argocd/operation-stuck)")
	require.Equal(t, "syncmedic", e.Source.Component)
	t.Logf("announced: %s", e.Message)
	pods, err := core.Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "job-name=migrate"})
	require.NoError(t, err)
	require.Len(t, pods.Items, 1, "the hook's one Pod")
	require.NotNil(t, pods.Items[0].Status.ContainerStatuses[0].State.Running, "the hook still running on the node")
	return ns
}

// recordOperation records every change of the Application app's status.operationState (phase, message, start, the
// results of its resources), read every 500 ms until the returned function is called, which returns them: what the
// application-controller did meanwhile, for a failure's message.
func recordOperation(n *testenv.Node, app string) (stop func() []string) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan []string)
	go func() {
		var seen []string
		last := ""
		for ctx.Err() == nil {
			a := argoCDApp(app, "", "", false) // in testenv.ArgoCDNamespace: only its key is read
			if err := n.Client.Get(ctx, client.ObjectKeyFromObject(a), a); err == nil {
				op, _, _ := unstructured.NestedMap(a.Object, "status", "operationState")
				delete(op, "operation")
				b, _ := json.Marshal(op)
				if string(b) != last {
					last = string(b)
					seen = append(seen, time.Now().UTC().Format("15:04:05.000")+" "+last)
				}
			}
			select {
			case <-ctx.Done():
			case <-time.After(500 * time.Millisecond):
			}
		}
		done <- seen
	}()
	return func() []string { cancel(); return <-done }
}

// checkIncidentStillOpen checks that the incident checkStuckHookAnnounced saw opened on app is still the one open,
// after Argo CD was reconfigured and argocd-server restarted while the hook kept running: syncmedic's only Event on
// the Application is still that one SyncmedicIncidentOpened (a resolve and a reopen would each have posted one).
// ops are the operation's changes meanwhile (recordOperation), logged when it is not.
func checkIncidentStillOpen(t *testing.T, n *testenv.Node, app string, ops []string) {
	t.Helper()
	events, err := n.Clientset.CoreV1().Events(testenv.ArgoCDNamespace).List(context.Background(),
		metav1.ListOptions{FieldSelector: "involvedObject.name=" + app})
	require.NoError(t, err)
	var said []string
	for _, e := range events.Items {
		if e.Source.Component == "syncmedic" {
			said = append(said, fmt.Sprintf("%s at %s: %s", e.Reason, e.LastTimestamp.Format(time.RFC3339), e.Message))
		}
	}
	if len(said) != 1 {
		logSyncmedic(t, n)
		t.Logf("the operation meanwhile:\n%s", strings.Join(ops, "\n"))
	}
	require.Len(t, said, 1, "the stuck hook's incident stays open across argocd-server's restart, announced once: %s", strings.Join(said, "\n"))
	require.Contains(t, said[0], "SyncmedicIncidentOpened")
}

// kustomizeExtensionSide is syncmedic's side of the extension with kustomize, as docs/install-kustomize.md, "Seeing incidents",
// says: components/argocd-extension/syncmedic in syncmedic's kustomization, here an overlay of manifests/base that
// also carries the policy in force (checkStuckHookAnnounced's), as a user's overlay carries theirs; applied with
// --force-conflicts since the test, not kubectl, wrote the policy last.
func kustomizeExtensionSide(t *testing.T, n *testenv.Node, work string) func() string {
	return func() string {
		policy, err := n.Clientset.CoreV1().ConfigMaps("syncmedic").Get(context.Background(), "syncmedic-policy", metav1.GetOptions{})
		require.NoError(t, err)
		patch, err := yaml.Marshal(map[string]any{"apiVersion": "v1", "kind": "ConfigMap",
			"metadata": map[string]any{"name": "syncmedic-policy", "namespace": "syncmedic"}, "data": policy.Data})
		require.NoError(t, err)
		overlay := filepath.Join(work, "syncmedic-overlay")
		require.NoError(t, os.Mkdir(overlay, 0o755))
		require.NoError(t, os.WriteFile(filepath.Join(overlay, "policy.yaml"), patch, 0o600))
		require.NoError(t, os.WriteFile(filepath.Join(overlay, "kustomization.yaml"), []byte("resources: [../manifests/base]\n"+
			"components: [../manifests/components/argocd-extension/syncmedic]\npatches: [{path: policy.yaml}]\n"), 0o600))
		return "kubectl apply --server-side --force-conflicts -k syncmedic-overlay"
	}
}

// kustomizeThreshold sets the 20 s argocd/operation-stuck threshold in the policy ConfigMap of the kustomize install
// (its overlay's policy) and restarts syncmedic, as the README says for a threshold.
func kustomizeThreshold(t *testing.T, n *testenv.Node) func() {
	return func() {
		ctx := context.Background()
		core := n.Clientset.CoreV1()
		policy, err := core.ConfigMaps("syncmedic").Get(ctx, "syncmedic-policy", metav1.GetOptions{})
		require.NoError(t, err)
		var doc map[string]any
		require.NoError(t, yaml.Unmarshal([]byte(policy.Data["policy.yaml"]), &doc))
		rules, _ := doc["rules"].(map[string]any)
		require.Empty(t, rules, "the install's policy: every rule as the defaults say")
		doc["rules"] = map[string]any{"argocd/operation-stuck": map[string]any{"threshold": "20s"}}
		b, err := yaml.Marshal(doc)
		require.NoError(t, err)
		policy.Data["policy.yaml"] = string(b)
		_, err = core.ConfigMaps("syncmedic").Update(ctx, policy, metav1.UpdateOptions{})
		require.NoError(t, err)
		// A rule's threshold is read when serve starts (docs/serve.md, "Policy"): restart it as the README says.
		t.Logf("restart:\n%s", runShell(t, n, t.TempDir(),
			"kubectl -n syncmedic rollout restart deploy/syncmedic\nkubectl -n syncmedic rollout status deploy/syncmedic --timeout=3m"))
	}
}

// helmThreshold sets the same threshold through the chart's policy value (a change of the ConfigMap by hand would be
// undone by the next `helm upgrade`), and restarts syncmedic.
func helmThreshold(t *testing.T, n *testenv.Node, work string) func() {
	return func() {
		t.Logf("threshold:\n%s", runShell(t, n, work, `helm upgrade syncmedic charts/syncmedic -n syncmedic --reuse-values --set-json 'policy.rules={"argocd/operation-stuck":{"threshold":"20s"}}'`+
			"\nkubectl -n syncmedic rollout restart deploy/syncmedic\nkubectl -n syncmedic rollout status deploy/syncmedic --timeout=3m"))
	}
}

// logSyncmedic logs each syncmedic Pod's /readyz?verbose and the end of its log, for a failed test.
func logSyncmedic(t *testing.T, n *testenv.Node) {
	ctx := context.Background()
	core := n.Clientset.CoreV1()
	pods, err := core.Pods("syncmedic").List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Logf("syncmedic's Pods: %v", err)
		return
	}
	for _, p := range pods.Items {
		ready, err := core.Pods("syncmedic").ProxyGet("http", p.Name, "9293", "/readyz", map[string]string{"verbose": ""}).DoRaw(ctx)
		t.Logf("%s /readyz?verbose (%v):\n%s", p.Name, err, ready)
		logs, err := core.Pods("syncmedic").GetLogs(p.Name, &corev1.PodLogOptions{TailLines: ptr.To[int64](300)}).DoRaw(ctx)
		t.Logf("%s log (%v):\n%s", p.Name, err, logs)
	}
}

// checkCMPRenders has the syncmedic Config Management Plugin (manifests/argocd-cmp: the sidecar on the real
// argocd-repo-server Pod, running Argo CD's argocd-cmp-server in the syncmedic image) render two applications of a
// repository whose PreSync hook Job has no delete policy: with strict=true Argo CD shows the plugin's refusal as a
// ComparisonError naming the hazard; with annotate=true the application syncs, and the hook Job the node ran carries
// syncmedic.io/hazards.
func checkCMPRenders(t *testing.T, n *testenv.Node) {
	t.Helper()
	ctx := context.Background()
	list, err := n.Clientset.CoreV1().Pods(testenv.ArgoCDNamespace).List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/name=argocd-repo-server"})
	require.NoError(t, err)
	var pods []corev1.Pod
	for _, p := range list.Items {
		if p.DeletionTimestamp == nil { // not the one the rollout replaced, still terminating
			pods = append(pods, p)
		}
	}
	require.Len(t, pods, 1)
	var sidecar *corev1.ContainerStatus
	for i, c := range pods[0].Status.ContainerStatuses {
		if c.Name == "syncmedic-cmp" {
			sidecar = &pods[0].Status.ContainerStatuses[i]
		}
	}
	require.NotNil(t, sidecar, "the sidecar on the repo-server Pod")
	require.True(t, sidecar.Ready)
	require.Equal(t, "docker.io/"+strings.TrimPrefix(makefileImage(t), "docker.io/"), "docker.io/"+strings.TrimPrefix(sidecar.Image, "docker.io/"))

	ns := n.Namespace(t)
	repo := testenv.NewGitRepo(t)
	repo.Write(t, "app/configmap.yaml", "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: settings\ndata:\n  color: blue\n")
	repo.Write(t, "app/presync.yaml", hookJob("migrate", "PreSync", "true"))
	head := repo.Commit(t, "a hook without a delete policy")
	url := n.ServeGitRepo(t, ns, repo)
	withPlugin := func(name, param string) *unstructured.Unstructured {
		app := argoCDApp(name, url, ns, true)
		require.NoError(t, unstructured.SetNestedMap(app.Object, map[string]any{"name": "syncmedic-v1",
			"parameters": []any{map[string]any{"name": param, "string": "true"}}}, "spec", "source", "plugin"))
		require.NoError(t, n.Client.Create(ctx, app))
		t.Cleanup(func() { _ = n.Client.Delete(context.Background(), app) })
		return app
	}
	strict := withPlugin(ns+"-strict", "strict")
	poll(t, "the strict application's ComparisonError", func() (bool, error) {
		if err := n.Client.Get(ctx, client.ObjectKeyFromObject(strict), strict); err != nil {
			return false, err
		}
		conditions, _, _ := unstructured.NestedSlice(strict.Object, "status", "conditions")
		for _, c := range conditions {
			m := c.(map[string]any)
			if m["type"] == "ComparisonError" && strings.Contains(fmt.Sprint(m["message"]), "hook-no-delete-policy") {
				t.Logf("strict: %s", m["message"])
				return true, nil
			}
		}
		return false, fmt.Errorf("conditions %v", conditions)
	})
	annotated := withPlugin(ns+"-annotated", "annotate")
	poll(t, "the annotated application synced", func() (bool, error) {
		if err := n.Client.Get(ctx, client.ObjectKeyFromObject(annotated), annotated); err != nil {
			return false, err
		}
		phase, _, _ := unstructured.NestedString(annotated.Object, "status", "operationState", "phase")
		revision, _, _ := unstructured.NestedString(annotated.Object, "status", "operationState", "syncResult", "revision")
		conditions, _, _ := unstructured.NestedSlice(annotated.Object, "status", "conditions")
		return phase == "Succeeded" && revision == head, fmt.Errorf("operation %q at %q, conditions %v", phase, revision, conditions)
	})
	job, err := n.Clientset.BatchV1().Jobs(ns).Get(ctx, "migrate", metav1.GetOptions{})
	require.NoError(t, err)
	require.Contains(t, job.Annotations["syncmedic.io/hazards"], "hook-no-delete-policy")
	require.Equal(t, int32(1), job.Status.Succeeded)
}

// readmeIncidentsSection is the README section whose first sh block sets up the incident API's token for Argo CD.
const readmeIncidentsSection = "### Seeing incidents: the incident API, the incident page and the Argo CD extension"

// checkExtension puts syncmedic into Argo CD's UI as the README says ("Seeing incidents"): its token commands as
// written; syncmedic's side given by syncmedicSide (kustomizeExtensionSide, or the section's Helm block);
// manifests/components/argocd-extension added to Argo CD's kustomization (with manifests/argocd-cmp, as before);
// argocd-server restarted. Then argocd-server, its installer init container having fetched the bundle from
// syncmedic's Service, serves the extension in /extensions.js; a user logged in to Argo CD reaches the incident API
// through argocd-server's proxy extension, scoped to the application app, and sees its open incident; and syncmedic
// serves the incident page.
func checkExtension(t *testing.T, n *testenv.Node, work, app string, syncmedicSide func() string) {
	t.Helper()
	ctx := context.Background()
	t.Logf("extension token:\n%s", runShell(t, n, work, readmeBlock(t, readmeIncidentsSection, 1)))
	t.Logf("syncmedic's side of the extension:\n%s", runShell(t, n, work, syncmedicSide()+
		"\nkubectl -n syncmedic rollout status deploy/syncmedic --timeout=3m"))
	n.ApplyArgoCD(t, filepath.Join(repoRoot(t), "manifests", "argocd-cmp"), filepath.Join(repoRoot(t), "manifests", "components", "argocd-account"), filepath.Join(repoRoot(t), "manifests", "components", "argocd-extension"))
	t.Logf("argocd-server restarted:\n%s", runShell(t, n, work,
		"kubectl -n argocd rollout restart deploy/argocd-server\nkubectl -n argocd rollout status deploy/argocd-server --timeout=3m"))

	core := n.Clientset.CoreV1()
	var server corev1.Pod
	poll(t, "one ready argocd-server Pod", func() (bool, error) {
		list, err := core.Pods(testenv.ArgoCDNamespace).List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/name=argocd-server"})
		if err != nil {
			return false, err
		}
		var live []corev1.Pod
		for _, p := range list.Items {
			if p.DeletionTimestamp == nil && len(p.Status.ContainerStatuses) > 0 && p.Status.ContainerStatuses[0].Ready {
				live = append(live, p)
			}
		}
		if len(live) == 1 && len(list.Items) == 1 {
			server = live[0]
			return true, nil
		}
		return false, fmt.Errorf("%d Pods, %d ready", len(list.Items), len(live))
	})
	base := "https://" + net.JoinHostPort(server.Status.PodIP, "8080")
	c := n.PodNetworkClient()
	get := func(path string, header http.Header) (int, string) {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+path, nil)
		require.NoError(t, err)
		for k, v := range header {
			req.Header[k] = v
		}
		resp, err := c.Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		return resp.StatusCode, string(b)
	}
	code, js := get("/extensions.js", nil)
	require.Equal(t, http.StatusOK, code)
	require.Contains(t, js, "syncmedic", "the bundle the installer fetched from syncmedic")

	secret, err := core.Secrets(testenv.ArgoCDNamespace).Get(ctx, "argocd-initial-admin-secret", metav1.GetOptions{})
	require.NoError(t, err)
	body, err := json.Marshal(map[string]string{"username": "admin", "password": string(secret.Data["password"])})
	require.NoError(t, err)
	resp, err := c.Post(base+"/api/v1/session", "application/json", strings.NewReader(string(body)))
	require.NoError(t, err)
	var session struct{ Token string }
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&session))
	resp.Body.Close()
	require.NotEmpty(t, session.Token)

	header := http.Header{"Cookie": {"argocd.token=" + session.Token},
		"Argocd-Application-Name": {testenv.ArgoCDNamespace + ":" + app}, "Argocd-Project-Name": {"default"}}
	code, incidents := get("/extensions/syncmedic/api/v1/incidents?state=all", header)
	require.Equal(t, http.StatusOK, code, incidents)
	require.Contains(t, incidents, "argocd/operation-stuck")
	require.Contains(t, incidents, app)
	t.Logf("through argocd-server's proxy extension: %.300s", incidents)
	code, refused := get("/extensions/syncmedic/api/v1/incidents?state=all", http.Header{"Argocd-Application-Name": header["Argocd-Application-Name"],
		"Argocd-Project-Name": {"default"}})
	require.GreaterOrEqual(t, code, 400, "no Argo CD session, no incident: %s", refused)
	require.NotContains(t, refused, "argocd/operation-stuck")

	pods, err := core.Pods("syncmedic").List(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	page, err := core.Pods("syncmedic").ProxyGet("http", pods.Items[0].Name, "9292", "/ui/", nil).DoRaw(ctx)
	require.NoError(t, err)
	require.Contains(t, string(page), "<html")
}
