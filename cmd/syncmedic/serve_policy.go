package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sort"
	"strings"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/klog/v2"

	"github.com/syncmedic/syncmedic"
	"github.com/syncmedic/syncmedic/incident"
	"github.com/syncmedic/syncmedic/policy"
	"github.com/syncmedic/syncmedic/snapshot"
)

// policyHolder keeps the current policy and re-reads its source every interval; an invalid new policy is logged
// and the last good one stays in force.
type policyHolder struct {
	cur      atomic.Pointer[policy.Policy]
	load     func(ctx context.Context) (*policy.Policy, error) // nil: the default policy, never reloaded
	interval time.Duration
	source   string
	log      *slog.Logger
}

func newPolicyHolder(ctx context.Context, o *serveOptions, kube kubernetes.Interface, log *slog.Logger) (*policyHolder, error) {
	h := &policyHolder{interval: o.policyReload, source: "default (notify every rule, act on none)", log: log}
	switch {
	case o.policyFile != "" && o.policyConfigMap != "":
		return nil, errors.New("give --policy-file or --policy-configmap, not both")
	case o.policyFile != "":
		file := o.policyFile
		h.source = "file " + file
		h.load = func(context.Context) (*policy.Policy, error) { return policy.LoadPolicyFile(file) }
	case o.policyConfigMap != "":
		ns, name, err := splitRef("--policy-configmap", o.policyConfigMap)
		if err != nil {
			return nil, err
		}
		if kube == nil {
			return nil, errors.New("--policy-configmap needs a cluster: give --kubeconfig or run in a Pod")
		}
		h.source = "ConfigMap " + o.policyConfigMap
		h.load = func(ctx context.Context) (*policy.Policy, error) {
			cm, err := kube.CoreV1().ConfigMaps(ns).Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return nil, fmt.Errorf("policy ConfigMap %s/%s: %w", ns, name, err)
			}
			p, err := policy.LoadPolicy([]byte(cm.Data[policy.PolicyConfigMapKey]))
			if err != nil {
				return nil, fmt.Errorf("policy ConfigMap %s/%s key %s: %w", ns, name, policy.PolicyConfigMapKey, err)
			}
			return p, nil
		}
	}
	p := policy.DefaultPolicy()
	if h.load != nil {
		var err error
		if p, err = h.load(ctx); err != nil {
			return nil, err
		}
	}
	h.cur.Store(p)
	log.Info("policy loaded", "source", h.source, "killSwitch", p.KillSwitch, "resolveAfter", p.ResolveAfter)
	h.warn(p)
	return h, nil
}

// warn logs what the policy lets happen that its author may not expect (policy.Warnings).
func (h *policyHolder) warn(p *policy.Policy) {
	for _, w := range p.Warnings() {
		h.log.Warn("policy: "+w, "source", h.source)
	}
}

// Get returns the policy in force.
func (h *policyHolder) Get() *policy.Policy { return h.cur.Load() }

// reload re-reads the policy until ctx ends.
func (h *policyHolder) reload(ctx context.Context) error {
	if h.load == nil || h.interval <= 0 {
		return nil
	}
	t := time.NewTicker(h.interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
		p, err := h.load(ctx)
		if err != nil {
			h.log.Error("policy not reloaded; the previous policy stays in force", "source", h.source, "err", err)
			continue
		}
		old := h.cur.Swap(p)
		if !slices.Equal(old.Warnings(), p.Warnings()) {
			h.warn(p)
		}
		if old.KillSwitch != p.KillSwitch {
			h.log.Warn("kill switch changed", "killSwitch", p.KillSwitch, "source", h.source)
		}
		if changed := changedThresholds(old, p); len(changed) > 0 {
			h.log.Warn("policy thresholds changed: they take effect when serve restarts (kubectl rollout restart "+
				"of its Deployment); the rest of the new policy is in force now", "rules", changed, "source", h.source)
		}
	}
}

// changedThresholds lists the rules whose policy threshold differs between old and p, sorted. The rules' watches
// take their thresholds when serve starts (applyPolicyThresholds), so a change waits for a restart.
func changedThresholds(old, p *policy.Policy) []string {
	var out []string
	var th snapshot.Thresholds
	for id := range thresholdFields(&th) {
		d1, ok1 := old.Threshold(id)
		d2, ok2 := p.Threshold(id)
		if ok1 != ok2 || d1 != d2 {
			out = append(out, string(id))
		}
	}
	sort.Strings(out)
	return out
}

// applyPolicyThresholds lets the policy override the age thresholds given by flags.
func applyPolicyThresholds(th *snapshot.Thresholds, p *policy.Policy) {
	for id, field := range thresholdFields(th) {
		if field == nil {
			continue // a Kustomization rule: kustomizationThreshold below
		}
		if d, ok := p.Threshold(id); ok {
			*field = d
		}
	}
	if d, ok := kustomizationThreshold(p); ok {
		th.Flux.Kustomization = d
	}
}

// thresholdFields maps each rule with an age threshold to its field in th; the Kustomization rules, which share
// one field (kustomizationThreshold), map to nil.
func thresholdFields(th *snapshot.Thresholds) map[syncmedic.RuleID]*time.Duration {
	return map[syncmedic.RuleID]*time.Duration{
		syncmedic.RuleHookFinalizerStuck:              &th.ArgoCD.HookFinalizer,
		syncmedic.RuleHookCompletionMissed:            &th.ArgoCD.HookCompletion,
		syncmedic.RuleOperationStuck:                  &th.ArgoCD.OperationStuck,
		syncmedic.RuleControllerNotProcessing:         &th.ArgoCD.ControllerNotProcessing,
		syncmedic.RuleAppDeletionStuck:                &th.ArgoCD.AppDeletion,
		syncmedic.RuleHookNotDeleted:                  &th.ArgoCD.HookDeletion,
		syncmedic.RuleWaitingForHealth:                &th.ArgoCD.WaitingForHealth,
		syncmedic.RuleAutoSyncNotRetried:              &th.ArgoCD.AutoSyncNotRetried,
		syncmedic.RuleOperationOrphaned:               &th.ArgoCD.OperationOrphaned,
		syncmedic.RuleRollingSyncStalled:              &th.ArgoCD.RollingSyncStalled,
		syncmedic.RuleReleaseDeletionStuck:            &th.Flux.ReleaseDeletion,
		syncmedic.RuleReadyUnknownStuck:               &th.Flux.ReadyUnknown,
		syncmedic.RuleReconcileRequestNotHandled:      &th.Flux.ReconcileRequest,
		syncmedic.RuleStuckTerminating:                &th.Kube.Terminating,
		syncmedic.RuleWebhookBackendMissing:           &th.Kube.WebhookBackend,
		syncmedic.RuleArtifactGCFinalizerStuck:        &th.Kube.ArtifactGC,
		syncmedic.RuleHelmReleaseStaleStatus:          &th.Flux.StaleStatus,
		syncmedic.RuleDependencyNotReadyFalse:         &th.Flux.DependencyNotReady,
		syncmedic.RuleKustomizationDependencyNotReady: nil, syncmedic.RuleKustomizationHealthCheckStuck: nil,
		syncmedic.RuleKustomizationDeletionStuck: nil, syncmedic.RuleKustomizationStaleRevision: nil,
		syncmedic.RuleKustomizationImmutableField: nil,
	}
}

// kustomizationThreshold is the policy's threshold for the five Kustomization rules, which share one margin
// (--kustomization-threshold): the smallest any of them sets, so each is reported no later than its own asks.
func kustomizationThreshold(p *policy.Policy) (time.Duration, bool) {
	var out time.Duration
	found := false
	for _, id := range []syncmedic.RuleID{syncmedic.RuleKustomizationDependencyNotReady, syncmedic.RuleKustomizationHealthCheckStuck,
		syncmedic.RuleKustomizationDeletionStuck, syncmedic.RuleKustomizationStaleRevision, syncmedic.RuleKustomizationImmutableField} {
		if d, ok := p.Threshold(id); ok && (!found || d < out) {
			out, found = d, true
		}
	}
	return out, found
}

// stateStore picks where incidents persist: --state-configmap, --state-file, else memory (with a warning).
func stateStore(o *serveOptions, kube kubernetes.Interface, log *slog.Logger) (incident.Store, error) {
	switch {
	case o.stateConfigMap != "" && o.stateFile != "":
		return nil, errors.New("give --state-configmap or --state-file, not both")
	case o.stateConfigMap != "":
		ns, name, err := splitRef("--state-configmap", o.stateConfigMap)
		if err != nil {
			return nil, err
		}
		if kube == nil {
			return nil, errors.New("--state-configmap needs a cluster: give --kubeconfig or run in a Pod")
		}
		return &incident.ConfigMapStore{Client: kube, Namespace: ns, Name: name}, nil
	case o.stateFile != "":
		return &incident.FileStore{Path: o.stateFile}, nil
	}
	log.Warn("incidents are kept in memory only: a restart announces open incidents again; set --state-configmap or --state-file")
	return &incident.MemoryStore{}, nil
}

func splitRef(flag, v string) (ns, name string, err error) {
	ns, name, ok := strings.Cut(v, "/")
	if !ok || ns == "" || name == "" || strings.Contains(name, "/") {
		return "", "", fmt.Errorf("%s %q: want namespace/name", flag, v)
	}
	return ns, name, nil
}

// routeKlog sends client-go's klog output (leader election, reflectors) to the slog handler.
func routeKlog(h slog.Handler) {
	klog.SetLogger(logr.FromSlogHandler(h))
}
