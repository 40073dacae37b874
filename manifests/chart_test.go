package manifests

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/syncmedic/syncmedic"
	"github.com/syncmedic/syncmedic/internal/testenv"
	"github.com/syncmedic/syncmedic/policy"
)

// convert decodes an unstructured object into a typed one.
func convert(t *testing.T, u *unstructured.Unstructured, into interface{}) {
	t.Helper()
	require.NoError(t, runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, into))
}

// identities lists the objects as "Kind namespace/name", sorted.
func identities(objs []*unstructured.Unstructured) []string {
	var ids []string
	for _, o := range objs {
		ids = append(ids, fmt.Sprintf("%s %s/%s", o.GetKind(), o.GetNamespace(), o.GetName()))
	}
	sort.Strings(ids)
	return ids
}

// TestChartRendersTheObjectsOfTheBase renders the chart the way the base installs (release and namespace
// syncmedic, namespace created) and compares it with the kustomize build of manifests/base.
func TestChartRendersTheObjectsOfTheBase(t *testing.T) {
	base := build(t, "base")
	chart := helmTemplate(t, "syncmedic", "syncmedic", "namespace.create=true")

	t.Run("the same objects by kind, namespace and name", func(t *testing.T) {
		require.Equal(t, identities(base), identities(chart))
	})

	rules := func(t *testing.T, objs []*unstructured.Unstructured, kind string) []rbacv1.PolicyRule {
		o := find(t, objs, kind, "syncmedic")
		var r struct {
			Rules []rbacv1.PolicyRule `json:"rules"`
		}
		convert(t, o, &r)
		require.NotEmpty(t, r.Rules)
		return r.Rules
	}
	for _, kind := range []string{"ClusterRole", "Role"} {
		t.Run("the "+kind+" grants exactly the rules of the base", func(t *testing.T) {
			require.Equal(t, rules(t, base, kind), rules(t, chart, kind))
		})
	}
	for _, kind := range []string{"ClusterRoleBinding", "RoleBinding"} {
		t.Run("the "+kind+" binds the same role to the same ServiceAccount", func(t *testing.T) {
			var b, c rbacv1.RoleBinding // a ClusterRoleBinding has the same fields
			convert(t, find(t, base, kind, "syncmedic"), &b)
			convert(t, find(t, chart, kind, "syncmedic"), &c)
			require.Equal(t, b.RoleRef, c.RoleRef)
			require.Equal(t, b.Subjects, c.Subjects)
		})
	}

	t.Run("the default policy is the base's, the documented default", func(t *testing.T) {
		var b, c corev1.ConfigMap
		convert(t, find(t, base, "ConfigMap", "syncmedic-policy"), &b)
		convert(t, find(t, chart, "ConfigMap", "syncmedic-policy"), &c)
		bp, err := policy.LoadPolicy([]byte(b.Data[policy.PolicyConfigMapKey]))
		require.NoError(t, err)
		cp, err := policy.LoadPolicy([]byte(c.Data[policy.PolicyConfigMapKey]))
		require.NoError(t, err)
		require.Equal(t, bp, cp)
	})

	t.Run("the NetworkPolicy admits the same peers", func(t *testing.T) {
		var b, c networkingv1.NetworkPolicy
		convert(t, find(t, base, "NetworkPolicy", "syncmedic-receiver"), &b)
		convert(t, find(t, chart, "NetworkPolicy", "syncmedic-receiver"), &c)
		require.Equal(t, b.Spec.Ingress, c.Spec.Ingress)
		require.Len(t, c.Spec.Ingress, 2, "notification-controller and Prometheus")
	})

	t.Run("the Pod runs the same image, as hardened, with the same probes, resources and spreading", func(t *testing.T) {
		var b, c appsv1.Deployment
		convert(t, find(t, base, "Deployment", "syncmedic"), &b)
		convert(t, find(t, chart, "Deployment", "syncmedic"), &c)
		require.Equal(t, *b.Spec.Replicas, *c.Spec.Replicas)
		bp, cp := b.Spec.Template.Spec, c.Spec.Template.Spec
		require.Equal(t, bp.SecurityContext, cp.SecurityContext)
		require.Equal(t, bp.ServiceAccountName, cp.ServiceAccountName)
		bc, cc := bp.Containers[0], cp.Containers[0]
		require.Equal(t, bc.Image, cc.Image)
		require.Equal(t, bc.SecurityContext, cc.SecurityContext)
		require.Equal(t, bc.LivenessProbe, cc.LivenessProbe)
		require.Equal(t, bc.ReadinessProbe, cc.ReadinessProbe)
		require.Equal(t, bc.Resources, cc.Resources)
		require.Equal(t, bc.Ports, cc.Ports)
		for _, arg := range bc.Args {
			require.Contains(t, cc.Args, arg)
		}
		term := func(p corev1.PodSpec) corev1.PodAffinityTerm {
			require.NotNil(t, p.Affinity)
			require.Len(t, p.Affinity.PodAntiAffinity.PreferredDuringSchedulingIgnoredDuringExecution, 1)
			return p.Affinity.PodAntiAffinity.PreferredDuringSchedulingIgnoredDuringExecution[0].PodAffinityTerm
		}
		require.Equal(t, term(bp).TopologyKey, term(cp).TopologyKey)
		require.Equal(t, c.Spec.Selector, term(cp).LabelSelector, "the chart's Pods repel each other")
	})
}

// deployment returns the chart's Deployment.
func deployment(t *testing.T, objs []*unstructured.Unstructured) appsv1.Deployment {
	t.Helper()
	for _, o := range objs {
		if o.GetKind() == "Deployment" {
			var d appsv1.Deployment
			convert(t, o, &d)
			return d
		}
	}
	t.Fatal("no Deployment rendered")
	return appsv1.Deployment{}
}

// volume returns the Pod's volume name, or nil.
func volume(d appsv1.Deployment, name string) *corev1.Volume {
	for _, v := range d.Spec.Template.Spec.Volumes {
		if v.Name == name {
			return &v
		}
	}
	return nil
}

// kinds lists the kinds rendered.
func kinds(objs []*unstructured.Unstructured) []string {
	var ks []string
	for _, o := range objs {
		ks = append(ks, o.GetKind())
	}
	return ks
}

func TestChartValues(t *testing.T) {
	const server = "argocd-server.argocd.svc:443"
	cases := []struct {
		name    string
		release string
		set     []string
		check   func(t *testing.T, objs []*unstructured.Unstructured)
	}{{
		name: "the image values point the Deployment at your own image",
		set:  []string{"image.repository=registry.example.com/team/syncmedic", "image.tag=v0.2.0"},
		check: func(t *testing.T, objs []*unstructured.Unstructured) {
			require.Equal(t, "registry.example.com/team/syncmedic:v0.2.0", deployment(t, objs).Spec.Template.Spec.Containers[0].Image)
		},
	}, {
		name: "a digest pins the image instead of the tag",
		set:  []string{"image.digest=sha256:" + fmt.Sprintf("%064d", 7)},
		check: func(t *testing.T, objs []*unstructured.Unstructured) {
			require.Equal(t, "ghcr.io/syncmedic/syncmedic@sha256:"+fmt.Sprintf("%064d", 7), deployment(t, objs).Spec.Template.Spec.Containers[0].Image)
		},
	}, {
		name: "without an Argo CD server no Argo CD flag but the token file is set and no CA is mounted",
		check: func(t *testing.T, objs []*unstructured.Unstructured) {
			d := deployment(t, objs)
			for _, arg := range d.Spec.Template.Spec.Containers[0].Args {
				require.NotRegexp(t, `^--argocd-(server|ca-file|insecure|plaintext|grpc-web)`, arg)
			}
			require.Nil(t, volume(d, "argocd-ca"))
		},
	}, {
		name: "the ca mode mounts the CA Secret and names its key with --argocd-ca-file",
		set:  []string{"argocd.server=" + server, "argocd.tls.mode=ca", "argocd.tls.caSecret=argocd-server-ca", "argocd.tls.caKey=tls.crt"},
		check: func(t *testing.T, objs []*unstructured.Unstructured) {
			d := deployment(t, objs)
			c := d.Spec.Template.Spec.Containers[0]
			require.Contains(t, c.Args, "--argocd-server="+server)
			require.Contains(t, c.Args, "--argocd-ca-file=/etc/syncmedic/argocd-ca/tls.crt")
			require.NotContains(t, c.Args, "--argocd-insecure")
			v := volume(d, "argocd-ca")
			require.NotNil(t, v)
			require.Equal(t, "argocd-server-ca", v.Secret.SecretName)
			require.Contains(t, c.VolumeMounts, corev1.VolumeMount{Name: "argocd-ca", MountPath: "/etc/syncmedic/argocd-ca", ReadOnly: true})
		},
	}, {
		name: "the insecure mode skips verification and mounts no CA",
		set:  []string{"argocd.server=" + server, "argocd.tls.mode=insecure"},
		check: func(t *testing.T, objs []*unstructured.Unstructured) {
			d := deployment(t, objs)
			require.Contains(t, d.Spec.Template.Spec.Containers[0].Args, "--argocd-insecure")
			require.Nil(t, volume(d, "argocd-ca"))
		},
	}, {
		name: "the plaintext mode talks plain gRPC to an insecure argocd-server",
		set:  []string{"argocd.server=argocd-server.argocd.svc:80", "argocd.tls.mode=plaintext"},
		check: func(t *testing.T, objs []*unstructured.Unstructured) {
			args := deployment(t, objs).Spec.Template.Spec.Containers[0].Args
			require.Contains(t, args, "--argocd-plaintext")
			require.Contains(t, args, "--argocd-server=argocd-server.argocd.svc:80")
		},
	}, {
		name: "grpcWeb tunnels gRPC over HTTP/1.1 beside the TLS mode",
		set:  []string{"argocd.server=argocd.example.com:443", "argocd.grpcWeb=true"},
		check: func(t *testing.T, objs []*unstructured.Unstructured) {
			args := deployment(t, objs).Spec.Template.Spec.Containers[0].Args
			require.Contains(t, args, "--argocd-grpc-web")
			require.Contains(t, args, "--argocd-server=argocd.example.com:443")
			require.NotContains(t, args, "--argocd-insecure")
		},
	}, {
		name: "without grpcWeb no gRPC-web flag is set",
		set:  []string{"argocd.server=" + server},
		check: func(t *testing.T, objs []*unstructured.Unstructured) {
			require.NotContains(t, deployment(t, objs).Spec.Template.Spec.Containers[0].Args, "--argocd-grpc-web")
		},
	}, {
		name: "a Slack channel adds the channel and the token file of the Secret",
		set:  []string{"slack.channel=#gitops-incidents"},
		check: func(t *testing.T, objs []*unstructured.Unstructured) {
			args := deployment(t, objs).Spec.Template.Spec.Containers[0].Args
			require.Contains(t, args, "--slack-channel=#gitops-incidents")
			require.Contains(t, args, "--slack-token-file=/etc/syncmedic/secrets/slack-token")
		},
	}, {
		name: "secrets.create renders the Secret the Pod mounts with the keys it reads",
		set:  []string{"secrets.create=true", "secrets.fluxHmacToken=hmac", "secrets.argocdToken=argo", "secrets.slackToken=xoxb"},
		check: func(t *testing.T, objs []*unstructured.Unstructured) {
			var s corev1.Secret
			convert(t, find(t, objs, "Secret", "syncmedic-secrets"), &s)
			require.Equal(t, map[string]string{"flux-hmac-token": "hmac", "argocd-token": "argo", "slack-token": "xoxb"}, s.StringData)
			require.Equal(t, s.Name, volume(deployment(t, objs), "secrets").Secret.SecretName)
		},
	}, {
		name: "an existing Secret is mounted by its name and none is rendered",
		set:  []string{"secrets.existingSecret=team-tokens"},
		check: func(t *testing.T, objs []*unstructured.Unstructured) {
			require.NotContains(t, kinds(objs), "Secret")
			require.Equal(t, "team-tokens", volume(deployment(t, objs), "secrets").Secret.SecretName)
		},
	}, {
		name: "the policy value becomes the policy ConfigMap syncmedic loads",
		set:  []string{"policy.rules.argocd/hook-finalizer-stuck.mode=auto", "policy.rules.argocd/hook-finalizer-stuck.projects={payments,shop}"},
		check: func(t *testing.T, objs []*unstructured.Unstructured) {
			var cm corev1.ConfigMap
			convert(t, find(t, objs, "ConfigMap", "syncmedic-policy"), &cm)
			p, err := policy.LoadPolicy([]byte(cm.Data[policy.PolicyConfigMapKey]))
			require.NoError(t, err)
			r := p.Rules[syncmedic.RuleHookFinalizerStuck]
			require.Equal(t, policy.ModeAuto, r.Mode)
			require.Equal(t, []string{"payments", "shop"}, r.Projects)
		},
	}, {
		name: "one replica renders no PodDisruptionBudget, which would block every drain",
		set:  []string{"replicas=1"},
		check: func(t *testing.T, objs []*unstructured.Unstructured) {
			require.NotContains(t, kinds(objs), "PodDisruptionBudget")
			require.Equal(t, int32(1), *deployment(t, objs).Spec.Replicas)
		},
	}, {
		name: "two replicas keep one through voluntary evictions",
		check: func(t *testing.T, objs []*unstructured.Unstructured) {
			var pdb policyv1.PodDisruptionBudget
			convert(t, find(t, objs, "PodDisruptionBudget", "syncmedic"), &pdb)
			require.Equal(t, intstr.FromInt32(1), *pdb.Spec.MinAvailable)
			require.Equal(t, deployment(t, objs).Spec.Selector, pdb.Spec.Selector)
		},
	}, {
		name:    "another release names its Lease, policy, state and silences after itself and its Role allows exactly those",
		release: "gitops",
		check: func(t *testing.T, objs []*unstructured.Unstructured) {
			args := deployment(t, objs).Spec.Template.Spec.Containers[0].Args
			require.Contains(t, args, "--leader-election-id=gitops-syncmedic")
			require.Contains(t, args, "--policy-configmap=tools/gitops-syncmedic-policy")
			require.Contains(t, args, "--state-configmap=tools/gitops-syncmedic-state")
			require.Contains(t, args, "--leader-election-namespace=tools")
			find(t, objs, "ConfigMap", "gitops-syncmedic-policy")
			var role rbacv1.Role
			convert(t, find(t, objs, "Role", "gitops-syncmedic"), &role)
			var names []string
			for _, r := range role.Rules {
				names = append(names, r.ResourceNames...)
			}
			require.ElementsMatch(t, []string{"gitops-syncmedic", "gitops-syncmedic-policy", "gitops-syncmedic-state", "gitops-syncmedic-state-silences"}, names)
		},
	}, {
		name: "the incident API reads its token from the Secret and admits argocd-server as the kustomize component does",
		set:  []string{"incidentAPI.enabled=true", "secrets.create=true", "secrets.fluxHmacToken=hmac", "secrets.apiToken=api", "secrets.proxyToken=proxy"},
		check: func(t *testing.T, objs []*unstructured.Unstructured) {
			require.Contains(t, deployment(t, objs).Spec.Template.Spec.Containers[0].Args, "--api-token-file=/etc/syncmedic/secrets/api-token")
			require.Contains(t, deployment(t, objs).Spec.Template.Spec.Containers[0].Args, "--proxy-token-file=/etc/syncmedic/secrets/proxy-token")
			var s corev1.Secret
			convert(t, find(t, objs, "Secret", "syncmedic-secrets"), &s)
			require.Equal(t, "api", s.StringData["api-token"])
			require.Equal(t, "proxy", s.StringData["proxy-token"])
			var chart, component networkingv1.NetworkPolicy
			convert(t, find(t, objs, "NetworkPolicy", "syncmedic-argocd-extension"), &chart)
			b, err := os.ReadFile(filepath.Join("components", "argocd-extension", "syncmedic", "networkpolicy.yaml"))
			require.NoError(t, err)
			require.NoError(t, yaml.Unmarshal(b, &component))
			require.Equal(t, component.Spec.Ingress, chart.Spec.Ingress, "the chart admits the same argocd-server Pods to the same port")
			require.Equal(t, component.Spec.PolicyTypes, chart.Spec.PolicyTypes)
			require.Equal(t, *deployment(t, objs).Spec.Selector, chart.Spec.PodSelector, "to the chart's syncmedic Pods")
		},
	}, {
		name: "the incident API is off by default: no token flag, no extension NetworkPolicy",
		check: func(t *testing.T, objs []*unstructured.Unstructured) {
			for _, arg := range deployment(t, objs).Spec.Template.Spec.Containers[0].Args {
				require.NotContains(t, arg, "--api-token-file")
				require.NotContains(t, arg, "--proxy-token-file")
			}
			for _, o := range objs {
				require.NotEqual(t, "syncmedic-argocd-extension", o.GetName())
			}
		},
	}, {
		name: "Slack's buttons over Socket Mode read the app-level token from the Secret; no URL is opened to Slack",
		set:  []string{"slack.channel=#i", "slack.interactivity=socketMode", "secrets.create=true", "secrets.fluxHmacToken=hmac", "secrets.slackAppToken=xapp-1"},
		check: func(t *testing.T, objs []*unstructured.Unstructured) {
			args := deployment(t, objs).Spec.Template.Spec.Containers[0].Args
			require.Contains(t, args, "--slack-app-token-file=/etc/syncmedic/secrets/slack-app-token")
			require.NotContains(t, strings.Join(args, " "), "--slack-signing-secret-file")
			var s corev1.Secret
			convert(t, find(t, objs, "Secret", "syncmedic-secrets"), &s)
			require.Equal(t, "xapp-1", s.StringData["slack-app-token"])
			for _, o := range objs {
				require.NotEqual(t, "syncmedic-slack", o.GetName())
			}
		},
	}, {
		name: "Slack's buttons over the request URL read the signing secret and admit the listed peers",
		set: []string{"slack.channel=#i", "slack.interactivity=requestURL", "secrets.create=true", "secrets.fluxHmacToken=hmac", "secrets.slackSigningSecret=sig",
			"slack.requestURLFrom[0].namespaceSelector.matchLabels.name=ingress"},
		check: func(t *testing.T, objs []*unstructured.Unstructured) {
			args := deployment(t, objs).Spec.Template.Spec.Containers[0].Args
			require.Contains(t, args, "--slack-signing-secret-file=/etc/syncmedic/secrets/slack-signing-secret")
			require.NotContains(t, strings.Join(args, " "), "--slack-app-token-file")
			var s corev1.Secret
			convert(t, find(t, objs, "Secret", "syncmedic-secrets"), &s)
			require.Equal(t, "sig", s.StringData["slack-signing-secret"])
			var np networkingv1.NetworkPolicy
			convert(t, find(t, objs, "NetworkPolicy", "syncmedic-slack"), &np)
			require.Equal(t, map[string]string{"name": "ingress"}, np.Spec.Ingress[0].From[0].NamespaceSelector.MatchLabels)
			require.Equal(t, *deployment(t, objs).Spec.Selector, np.Spec.PodSelector)
		},
	}, {
		name: "the Silence… dialog offers the durations of slack.silenceDurations, and serve's own without them",
		set:  []string{"slack.channel=#i", "slack.interactivity=socketMode", "slack.silenceDurations={30m,2h}"},
		check: func(t *testing.T, objs []*unstructured.Unstructured) {
			require.Contains(t, deployment(t, objs).Spec.Template.Spec.Containers[0].Args, "--slack-silence-durations=30m,2h")
		},
	}, {
		name: "slack.teamID pins the workspace with --slack-team-id",
		set:  []string{"slack.channel=#i", "slack.teamID=T024BE7LD"},
		check: func(t *testing.T, objs []*unstructured.Unstructured) {
			require.Contains(t, deployment(t, objs).Spec.Template.Spec.Containers[0].Args, "--slack-team-id=T024BE7LD")
		},
	}, {
		name: "silenceMaxDuration bounds silences with --silence-max-duration, and serve's own maximum without it",
		set:  []string{"silenceMaxDuration=2w"},
		check: func(t *testing.T, objs []*unstructured.Unstructured) {
			require.Contains(t, deployment(t, objs).Spec.Template.Spec.Containers[0].Args, "--silence-max-duration=2w")
		},
	}, {
		name: "Slack's buttons are off by default",
		set:  []string{"slack.channel=#i"},
		check: func(t *testing.T, objs []*unstructured.Unstructured) {
			args := strings.Join(deployment(t, objs).Spec.Template.Spec.Containers[0].Args, " ")
			require.NotContains(t, args, "--slack-app-token-file")
			require.NotContains(t, args, "--slack-signing-secret-file")
			require.NotContains(t, args, "--slack-silence-durations")
		},
	}, {
		name: "the monitoring objects are off unless asked for",
		check: func(t *testing.T, objs []*unstructured.Unstructured) {
			require.NotContains(t, kinds(objs), "ServiceMonitor")
			require.NotContains(t, kinds(objs), "PrometheusRule")
			require.NotContains(t, kinds(objs), "Namespace")
		},
	}}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			release := c.release
			if release == "" {
				release = "syncmedic"
			}
			ns := "syncmedic"
			if c.release != "" {
				ns = "tools"
			}
			c.check(t, helmTemplate(t, release, ns, c.set...))
		})
	}

	t.Run("helm lint --strict finds nothing to say", func(t *testing.T) {
		out, err := testenv.HelmCommand(t, "lint", "--strict", chartDir).CombinedOutput()
		require.NoError(t, err, "%s", out)
		require.Contains(t, string(out), "0 chart(s) failed")
	})
	refused := []struct {
		name, set, says string
	}{
		{"an unknown Argo CD TLS mode is refused naming the field and the choices", "argocd.tls.mode=strict",
			`at '/argocd/tls/mode': value must be one of 'verify', 'ca', 'insecure', 'plaintext'`},
		{"a gRPC-web setting that is not a boolean is refused", "argocd.grpcWeb=yes", `at '/argocd/grpcWeb'`},
		{"zero replicas are refused", "replicas=0", `at '/replicas': minimum: got 0, want 1`},
		{"a misspelled value is refused instead of ignored", "replica=3", `additional properties 'replica' not allowed`},
		{"a digest that is not sha256 is refused", "image.digest=v0.1.0", `at '/image/digest'`},
	}
	for _, r := range refused {
		t.Run(r.name, func(t *testing.T) {
			_, err := runHelm(t, "syncmedic", "syncmedic", r.set)
			require.ErrorContains(t, err, r.says)
		})
	}
	t.Run("without the schema the template still refuses an unknown Argo CD TLS mode", func(t *testing.T) {
		_, err := runHelm(t, "syncmedic", "syncmedic", "argocd.server="+server, "argocd.tls.mode=strict", "--skip-schema-validation")
		require.ErrorContains(t, err, `argocd.tls.mode is "strict": use verify, ca, insecure or plaintext`)
	})
	t.Run("secrets.create without the Flux HMAC token is refused", func(t *testing.T) {
		_, err := runHelm(t, "syncmedic", "syncmedic", "secrets.create=true")
		require.ErrorContains(t, err, "secrets.fluxHmacToken is required with secrets.create")
	})
}

// everything sets every value the chart has.
var everything = []string{
	"namespace.create=true",
	"image.repository=registry.example.com/team/syncmedic", "image.tag=v0.2.0", "image.pullPolicy=Always",
	"imagePullSecrets[0].name=registry",
	"replicas=3",
	"secrets.create=true", "secrets.fluxHmacToken=hmac", "secrets.argocdToken=argo", "secrets.slackToken=xoxb", "secrets.apiToken=api", "secrets.proxyToken=proxy",
	"incidentAPI.enabled=true",
	"argocd.server=argocd-server.argocd.svc:443", "argocd.tls.mode=ca", "argocd.tls.caSecret=argocd-ca", "argocd.grpcWeb=true",
	"flux.namespace=gitops",
	"slack.channel=#gitops-incidents", "slack.interactivity=requestURL", "secrets.slackSigningSecret=signing", "secrets.slackAppToken=xapp",
	"slack.requestURLFrom[0].namespaceSelector.matchLabels.kubernetes\\.io/metadata\\.name=ingress-nginx",
	"slack.silenceDurations={30m,2h}",
	"policy.killSwitch=true", "policy.rules.flux/retries-exhausted.mode=auto",
	"extraArgs={--kube-cluster-name=prod,--argocd-url=https://argocd.example.com}",
	"nodeSelector.kubernetes\\.io/os=linux",
	"tolerations[0].key=dedicated", "tolerations[0].operator=Exists", "tolerations[0].effect=NoSchedule",
	"podLabels.team=platform", "podAnnotations.example\\.com/owner=platform",
	"podDisruptionBudget.minAvailable=2",
	"networkPolicy.prometheus.namespace=observability",
	"serviceMonitor.enabled=true", "serviceMonitor.labels.release=kube-prometheus-stack",
	"prometheusRule.enabled=true", "prometheusRule.labels.release=kube-prometheus-stack",
	"dashboard.enabled=true",
	"serviceAccount.annotations.eks\\.amazonaws\\.com/role-arn=arn:aws:iam::123456789012:role/syncmedic",
	"priorityClassName=platform-critical",
	"topologySpreadConstraints[0].maxSkew=1", "topologySpreadConstraints[0].topologyKey=topology.kubernetes.io/zone",
	"topologySpreadConstraints[0].whenUnsatisfiable=ScheduleAnyway",
	"extraEnv[0].name=HTTPS_PROXY", "extraEnv[0].value=http://proxy.example.com:3128",
	"extraEnvFrom[0].configMapRef.name=proxy-settings",
	"extraVolumes[0].name=ca-bundle", "extraVolumes[0].configMap.name=ca-bundle",
	"extraVolumeMounts[0].name=ca-bundle", "extraVolumeMounts[0].mountPath=/etc/ssl/extra",
	"ingress.enabled=true", "ingress.className=nginx", "ingress.host=syncmedic.example.com",
	"ingress.tls[0].secretName=syncmedic-tls", "ingress.tls[0].hosts[0]=syncmedic.example.com",
	"global.imageRegistry=registry.example.com",
	"workflowsRemedy.enabled=true",
}

// TestChartAppliesToTheApiserver validates the rendered objects with a server-side dry-run apply against a real
// kube-apiserver (which has the prometheus-operator CRDs), with the default values and with every value set.
func TestChartAppliesToTheApiserver(t *testing.T) {
	env := testenv.Kube(t)
	installMonitoringCRDs(t, env)
	ctx := context.Background()
	// everything's priorityClassName: the Pod is admitted only when the PriorityClass exists.
	pc := &schedulingv1.PriorityClass{ObjectMeta: metav1.ObjectMeta{Name: "platform-critical"}, Value: 1000000}
	if err := env.Client.Create(ctx, pc); err != nil && !apierrors.IsAlreadyExists(err) {
		require.NoError(t, err)
	}
	cases := []struct {
		name string
		set  []string
	}{
		{name: "with the default values", set: nil},
		{name: "with every value set", set: everything},
	}
	for _, c := range cases {
		t.Run(c.name+" every object passes the apiserver's validation", func(t *testing.T) {
			ns := env.Namespace(t)
			objs := helmTemplate(t, "syncmedic", ns, c.set...)
			require.NotEmpty(t, objs)
			for _, o := range objs {
				o = o.DeepCopy()
				err := env.Client.Patch(ctx, o, client.Apply, client.DryRunAll, client.FieldOwner("syncmedic-chart-test"), client.ForceOwnership)
				require.NoError(t, err, "dry-run apply %s %s/%s", o.GetKind(), o.GetNamespace(), o.GetName())
			}
		})
		t.Run(c.name+" its Pod is admitted by the restricted Pod Security Standard", func(t *testing.T) {
			restricted := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: env.Namespace(t)}}
			require.NoError(t, env.Client.Get(ctx, client.ObjectKeyFromObject(restricted), restricted))
			if restricted.Labels == nil {
				restricted.Labels = map[string]string{}
			}
			restricted.Labels["pod-security.kubernetes.io/enforce"] = "restricted"
			require.NoError(t, env.Client.Update(ctx, restricted))
			d := deployment(t, helmTemplate(t, "syncmedic", restricted.Name, c.set...))
			pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "syncmedic-admission-check", Namespace: restricted.Name}, Spec: d.Spec.Template.Spec}
			require.NoError(t, env.Client.Create(ctx, pod, client.DryRunAll))
		})
	}
}
