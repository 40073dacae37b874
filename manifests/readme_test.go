package manifests

import (
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"
)

// createCommand is one `kubectl -n NS create secret generic NAME …` or `kubectl -n NS create configmap NAME …` of the
// README, with the keys it creates and their literal values (a --from-file key has the file name as value).
type createCommand struct {
	kind, namespace, name string
	keys                  map[string]string
}

var (
	createLine = regexp.MustCompile(`^kubectl -n (\S+) create (secret generic|configmap) (\S+)(.*)$`)
	fromFlag   = regexp.MustCompile(`--from-(literal|file)=([^=\s]+)=("[^"]*"|\S+)`)
)

// readmeCreateCommands returns the create commands of the shell blocks of the README and its pages (userDocs),
// continuation lines joined.
func readmeCreateCommands(t *testing.T) []createCommand {
	t.Helper()
	var cmds []createCommand
	var line string
	for _, raw := range strings.Split(userDocs(t), "\n") {
		raw = strings.TrimSpace(raw)
		if strings.HasSuffix(raw, "\\") {
			line += strings.TrimSuffix(raw, "\\") + " "
			continue
		}
		line += raw
		if code, _, _ := strings.Cut(line, "  #"); code != "" { // drop a trailing comment
			line = code
		}
		if m := createLine.FindStringSubmatch(line); m != nil {
			c := createCommand{kind: "Secret", namespace: m[1], name: m[3], keys: map[string]string{}}
			if m[2] == "configmap" {
				c.kind = "ConfigMap"
			}
			for _, f := range fromFlag.FindAllStringSubmatch(m[4], -1) {
				c.keys[f[2]] = strings.Trim(f[3], `"`)
			}
			cmds = append(cmds, c)
		}
		line = ""
	}
	return cmds
}

// TestREADMEInstallCommands checks the Secrets and ConfigMaps the README tells users to create against what the
// manifests and the chart read: names, namespaces and keys.
func TestREADMEInstallCommands(t *testing.T) {
	cmds := readmeCreateCommands(t)
	byName := map[string][]createCommand{}
	for _, c := range cmds {
		byName[c.kind+" "+c.namespace+"/"+c.name] = append(byName[c.kind+" "+c.namespace+"/"+c.name], c)
	}
	var found []string
	for k := range byName {
		found = append(found, k)
	}
	sort.Strings(found)

	base := build(t, "base")
	var d appsv1.Deployment
	convert(t, find(t, base, "Deployment", "syncmedic"), &d)
	pod := d.Spec.Template.Spec
	c := pod.Containers[0]
	secretFiles := map[string]bool{}                                                              // the keys of syncmedic-secrets the daemon reads, from its --*-file flags
	for _, arg := range append(c.Args, "--slack-token-file=/etc/syncmedic/secrets/slack-token") { // the README's Slack addition
		if _, path, ok := strings.Cut(arg, "-file=/etc/syncmedic/secrets/"); ok {
			secretFiles[path] = true
		}
	}
	mounts := map[string]string{}
	for _, m := range c.VolumeMounts {
		mounts[m.Name] = m.MountPath
	}
	secretOf := map[string]string{}
	for _, v := range pod.Volumes {
		if v.Secret != nil {
			secretOf[v.Name] = v.Secret.SecretName
		}
	}
	settingsKeys := map[string]bool{}
	for _, e := range c.Env {
		if e.ValueFrom != nil && e.ValueFrom.ConfigMapKeyRef != nil && e.ValueFrom.ConfigMapKeyRef.Name == "syncmedic-settings" {
			settingsKeys[e.ValueFrom.ConfigMapKeyRef.Key] = true
		}
	}
	lookup := func(t *testing.T, kind, namespace, name string) []createCommand {
		got := byName[kind+" "+namespace+"/"+name]
		require.NotEmpty(t, got, "the README creates no %s %s/%s (it creates %v)", kind, namespace, name, found)
		return got
	}

	t.Run("the token Secret the Pod mounts holds the Flux HMAC token and only keys the daemon reads", func(t *testing.T) {
		for _, cmd := range lookup(t, "Secret", d.Namespace, secretOf["secrets"]) {
			require.Contains(t, cmd.keys, "flux-hmac-token")
			for key := range cmd.keys {
				require.True(t, secretFiles[key], "the README creates the key %s, which no --*-file flag reads (%v)", key, secretFiles)
			}
		}
	})

	t.Run("every syncmedic-settings key is one the Deployment reads", func(t *testing.T) {
		for _, cmd := range lookup(t, "ConfigMap", d.Namespace, "syncmedic-settings") {
			require.Contains(t, cmd.keys, "argocd-server")
			for key := range cmd.keys {
				require.True(t, settingsKeys[key], "the README sets %s, which the Deployment does not read (%v)", key, settingsKeys)
			}
		}
	})

	t.Run("argocd-ca-file names a key of the CA Secret where the Pod mounts it", func(t *testing.T) {
		var caFile string
		for _, cmd := range lookup(t, "ConfigMap", d.Namespace, "syncmedic-settings") {
			if f, ok := cmd.keys["argocd-ca-file"]; ok {
				caFile = f
			}
		}
		require.NotEmpty(t, caFile, "the README's settings name no argocd-ca-file")
		dir, key := filepath.Split(caFile)
		require.Equal(t, mounts["argocd-ca"], filepath.Clean(dir))
		for _, cmd := range lookup(t, "Secret", d.Namespace, secretOf["argocd-ca"]) {
			require.Contains(t, cmd.keys, key)
		}
	})

	t.Run("the CA Secret is the chart's default for the ca mode", func(t *testing.T) {
		var values struct {
			Argocd struct {
				TLS struct {
					CASecret string `json:"caSecret"`
					CAKey    string `json:"caKey"`
				} `json:"tls"`
			} `json:"argocd"`
		}
		require.NoError(t, yaml.Unmarshal([]byte(readFile(t, filepath.Join(chartDir, "values.yaml"))), &values))
		for _, cmd := range lookup(t, "Secret", d.Namespace, values.Argocd.TLS.CASecret) {
			require.Contains(t, cmd.keys, values.Argocd.TLS.CAKey)
		}
	})

	t.Run("the Flux Secret is the one the Provider signs with, in its namespace, with the key token", func(t *testing.T) {
		provider := find(t, build(t, "flux"), "Provider", "syncmedic")
		ref, _, _ := unstructured.NestedString(provider.Object, "spec", "secretRef", "name")
		for _, cmd := range lookup(t, "Secret", provider.GetNamespace(), ref) {
			require.Equal(t, map[string]string{"token": "$TOKEN"}, cmd.keys, "the same token as flux-hmac-token")
		}
	})
}
