package testenv

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/argoproj/argo-cd/v2/common"
	accountpkg "github.com/argoproj/argo-cd/v2/pkg/apiclient/account"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// RequireOverrideForRevisionSync is the argocd-cm key (Argo CD v3.2+) with which argocd-server requires
// `applications, override` for a Sync naming a revision other than the application's targetRevision.
const RequireOverrideForRevisionSync = "application.sync.requireOverridePrivilegeForRevisionSync"

// SetSetting sets key in argocd-cm to value, or removes it when value is nil. argocd-server reads argocd-cm through
// its informer, so the change takes effect a moment later: the caller checks for the effect it relies on. Stacks
// are shared: set only what no other test relies on being unset, and restore it in a Cleanup.
func (a *ArgoCDServer) SetSetting(t testing.TB, key string, value *string) {
	t.Helper()
	a.mergeData(t, common.ArgoCDConfigMapName, map[string]*string{key: value})
}

// AddAccount adds a local account with the apiKey capability (argocd-cm accounts.<account>) and grants it policy
// (argocd-rbac-cm lines, under a key of its own, policy.<account>.csv, which Argo CD appends to policy.csv), then
// returns an API token for it once argocd-server accepts the token. account must be unique on the stack.
func (a *ArgoCDServer) AddAccount(t testing.TB, account string, policy ...string) string {
	t.Helper()
	a.mergeData(t, common.ArgoCDConfigMapName, map[string]*string{"accounts." + account: strPtr("apiKey")})
	a.mergeData(t, common.ArgoCDRBACConfigMapName, map[string]*string{"policy." + account + ".csv": strPtr(strings.Join(policy, "\n"))})
	closer, accounts, err := a.Client(t, a.AdminToken(t)).NewAccountClient()
	if err != nil {
		t.Fatalf("testenv: Argo CD account client: %v", err)
	}
	defer closeQuietly(closer)
	// The settings informer sees the new account a moment later; CreateToken refuses an unknown account.
	deadline := time.Now().Add(30 * time.Second)
	for {
		_, err := accounts.GetAccount(context.Background(), &accountpkg.GetAccountRequest{Name: account})
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("testenv: argocd-server does not know account %q 30s after argocd-cm was changed: %v", account, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	return a.Token(t, account)
}

// SetAccountPolicy replaces the argocd-rbac-cm lines AddAccount gave account (its key policy.<account>.csv) with
// policy, or removes the key when policy is empty: what a person editing Argo CD's RBAC does. argocd-server reads
// argocd-rbac-cm through its informer, so the change takes effect a moment later.
func (a *ArgoCDServer) SetAccountPolicy(t testing.TB, account string, policy ...string) {
	t.Helper()
	var v *string
	if len(policy) > 0 {
		v = strPtr(strings.Join(policy, "\n"))
	}
	a.mergeData(t, common.ArgoCDRBACConfigMapName, map[string]*string{"policy." + account + ".csv": v})
}

// CanI asks argocd-server whether the account of token may take action on applications matching object (what
// `argocd account can-i ACTION applications OBJECT` does).
func (a *ArgoCDServer) CanI(t testing.TB, token, action, object string) bool {
	t.Helper()
	closer, accounts, err := a.Client(t, token).NewAccountClient()
	if err != nil {
		t.Fatalf("testenv: Argo CD account client: %v", err)
	}
	defer closeQuietly(closer)
	res, err := accounts.CanI(context.Background(), &accountpkg.CanIRequest{Resource: "applications", Action: action, Subresource: object})
	if err != nil {
		t.Fatalf("testenv: CanI %s applications %s: %v", action, object, err)
	}
	return res.GetValue() == "yes"
}

// mergeData merge-patches the data of one of the control-plane ConfigMaps (a nil value removes the key).
func (a *ArgoCDServer) mergeData(t testing.TB, name string, data map[string]*string) {
	t.Helper()
	patch, err := json.Marshal(map[string]any{"data": data})
	if err != nil {
		t.Fatalf("testenv: %v", err)
	}
	cm := &corev1.ConfigMap{}
	cm.Name, cm.Namespace = name, a.Namespace
	if err := a.Env.Client.Patch(context.Background(), cm, client.RawPatch(types.MergePatchType, patch)); err != nil {
		t.Fatalf("testenv: patching ConfigMap %s/%s: %v", a.Namespace, name, err)
	}
}

func strPtr(s string) *string { return &s }

// RemoveHookFinalizer removes argocd.argoproj.io/hook-finalizer alone from the app's Job name, as a person does,
// reading the Job afresh on every attempt: the other finalizers (foregroundDeletion, which the garbage collector may
// remove meanwhile) are kept as the server has them. A Job already gone, or without the finalizer, is left alone.
func (a *RealHookApp) RemoveHookFinalizer(t testing.TB, name string) {
	t.Helper()
	key := client.ObjectKey{Namespace: a.Namespace, Name: name}
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		job := &batchv1.Job{}
		if err := a.Stack.Env.Client.Get(context.Background(), key, job); err != nil {
			return client.IgnoreNotFound(err)
		}
		if !slices.Contains(job.Finalizers, HookFinalizer) {
			return nil
		}
		job.Finalizers = slices.DeleteFunc(slices.Clone(job.Finalizers), func(f string) bool { return f == HookFinalizer })
		return a.Stack.Env.Client.Update(context.Background(), job)
	})
	if err != nil {
		t.Fatalf("testenv: removing %s from Job %s: %v", HookFinalizer, key, err)
	}
}
