package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"regexp"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes"

	"github.com/syncmedic/syncmedic"
	"github.com/syncmedic/syncmedic/incident"
)

// fixID is what `syncmedic fix` is given: a finding's fingerprint (as `scan` prints it), or the ID of an incident
// (as Slack and serve show it), which is the fingerprint followed by the second the incident opened and, when two
// opened in the same second, a counter (see Tracker.newID).
type fixID struct {
	raw         string
	fingerprint string
	// incident is the incident ID when raw is one, "" for a bare fingerprint.
	incident string
}

var (
	fingerprintPattern = regexp.MustCompile(`^[0-9a-f]{16}$`)
	incidentPattern    = regexp.MustCompile(`^([0-9a-f]{16})-[0-9]+(-[0-9]+)?$`)
)

// parseFixID accepts a fingerprint or an incident ID and refuses anything else.
func parseFixID(s string) (fixID, error) {
	id := strings.ToLower(strings.TrimSpace(s))
	switch {
	case fingerprintPattern.MatchString(id):
		return fixID{raw: id, fingerprint: id}, nil
	case incidentPattern.MatchString(id):
		return fixID{raw: id, fingerprint: incidentPattern.FindStringSubmatch(id)[1], incident: id}, nil
	}
	return fixID{}, fmt.Errorf("%q is not a finding ID: give a fingerprint (16 hex digits, the `fix:` line of `syncmedic scan -o yaml`) or an incident ID (fingerprint-number, as Slack shows it)", s)
}

// stateStore opens the incident store fix reads (the one serve writes), or returns nil when none is given.
func (o *fixOptions) stateStore() (incident.Store, error) {
	switch {
	case o.stateConfigMap != "" && o.stateFile != "":
		return nil, errors.New("give --state-configmap or --state-file, not both")
	case o.stateFile != "":
		// serve creates the file on its first save, so a missing one here is a wrong path, not an empty store.
		if _, err := os.Stat(o.stateFile); err != nil {
			return nil, fmt.Errorf("--state-file: %w", err)
		}
		return &incident.FileStore{Path: o.stateFile}, nil
	case o.stateConfigMap != "":
		ns, name, err := splitRef("--state-configmap", o.stateConfigMap)
		if err != nil {
			return nil, err
		}
		if !o.live.kubeEnabled() {
			return nil, errors.New("--state-configmap needs --kubeconfig or --context: the ConfigMap is read through the Kubernetes API")
		}
		cfg, err := o.live.restConfig()
		if err != nil {
			return nil, err
		}
		c, err := kubernetes.NewForConfig(cfg)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", o.live.kubeSource(), err)
		}
		return &incident.ConfigMapStore{Client: c, Namespace: ns, Name: name}, nil
	}
	return nil, nil
}

// storedIncident returns the stored incident id names: the incident itself for an incident ID, else the latest
// incident of the fingerprint; nil when the store does not know it.
func storedIncident(ctx context.Context, store incident.Store, id fixID) (*incident.Incident, error) {
	incidents, err := store.Load(ctx)
	if err != nil {
		return nil, err
	}
	var latest *incident.Incident
	for i := range incidents {
		inc := &incidents[i]
		if id.incident != "" && inc.ID == id.incident {
			return inc, nil
		}
		if inc.Fingerprint == id.fingerprint && (latest == nil || inc.OpenedAt.After(latest.OpenedAt)) {
			latest = inc
		}
	}
	return latest, nil
}

// coverage says whether the live scan just made would have reported f had it still been stuck, and when not, why.
// Only then may fix say a known finding is gone: a source that was not asked, a scope that left the object out, or
// a kind that was not read proves nothing.
func coverage(f syncmedic.Finding, o *liveOptions, problems []string) (bool, string) {
	if f.Object.Tool == syncmedic.ToolArgoCD {
		a := o.argocd
		switch {
		case !a.enabled():
			return false, "it is an Argo CD finding and the scan did not read Argo CD: give --argocd-server"
		case a.selector != "":
			return false, "--argocd-selector narrows the scan and may leave application " + f.Object.App + " out: run without it"
		case len(a.projects) > 0 && !slices.Contains(a.projects, f.Object.Project):
			return false, "--argocd-project leaves out project " + f.Object.Project
		case a.appNamespace != "" && a.appNamespace != f.Object.AppNamespace:
			return false, "--argocd-app-namespace leaves out namespace " + f.Object.AppNamespace
		}
		unread := "argocd app " + f.Object.AppNamespace + "/" + f.Object.App + ": "
		for _, p := range problems {
			if strings.HasPrefix(p, unread) {
				return false, "the scan could not read everything about application " + f.Object.App + " (" + p + ")"
			}
		}
		return true, ""
	}
	if !o.kubeEnabled() {
		return false, "it is a cluster finding and the scan did not read the cluster: give --kubeconfig or --context"
	}
	gk := schema.GroupKind{Group: f.Object.Group, Kind: f.Object.Kind}
	for _, l := range liveLists {
		if l.gk != gk || (l.name != "" && l.name != f.Object.Name) {
			continue
		}
		for _, p := range problems {
			if strings.HasPrefix(p, l.gvr.GroupResource().String()+": not served") {
				return false, "the cluster did not serve " + l.gvr.GroupResource().String() + " (" + p + ")"
			}
		}
		return true, ""
	}
	return false, "a live scan does not list " + gk.String() + " objects"
}
