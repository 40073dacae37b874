package flux

import (
	"bytes"
	"compress/gzip"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"time"

	helmv2 "github.com/fluxcd/helm-controller/api/v2"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// HelmStorageSecretType is the type of the Secrets Helm's storage driver (the default, "secret") writes, one per
// release revision, named sh.helm.release.v1.<release>.v<revision> and labelled owner=helm, name, status, version.
const HelmStorageSecretType = "helm.sh/release.v1"

// HelmStorageSelector selects Helm's release Secrets of one release (fmt with the release name).
const HelmStorageSelector = "owner=helm,name=%s"

// maxReleaseBytes bounds what decoding one release record may inflate to: a release holds its chart and manifest,
// a few MB at most (the apiserver caps a Secret at 1 MiB compressed).
const maxReleaseBytes = 32 << 20

// HelmStorage is the state of one release revision as Helm's storage records it.
type HelmStorage struct {
	// Secret is the storage Secret, namespace/name.
	Secret string
	// Release and Revision name the release revision; Status is Helm's (deployed, pending-install,
	// pending-upgrade, failed, superseded...).
	Release  string
	Revision int
	Status   string
	// Description is Helm's last word on the revision ("Install complete", "Initial install underway"...), Chart
	// its chart as name@version, and LastDeployed when Helm last wrote it; empty when the record was not decoded.
	Description  string
	Chart        string
	LastDeployed time.Time
}

// String renders the storage state for evidence: "sh.helm.release.v1.web.v1: pending-install (Initial install
// underway), chart web@1.0.0, last deployed 2025-06-10T13:00:00Z".
func (s HelmStorage) String() string {
	out := s.Secret + ": " + s.Status
	if s.Description != "" {
		out += " (" + s.Description + ")"
	}
	if s.Chart != "" {
		out += ", chart " + s.Chart
	}
	if !s.LastDeployed.IsZero() {
		out += ", last deployed " + s.LastDeployed.UTC().Format(time.RFC3339)
	}
	return out
}

// helmRelease is the part of Helm's release record (helm.sh/helm/v3/pkg/release.Release, JSON) read here.
type helmRelease struct {
	Name    string `json:"name"`
	Version int    `json:"version"`
	Info    struct {
		Status       string    `json:"status"`
		Description  string    `json:"description"`
		LastDeployed time.Time `json:"last_deployed"`
	} `json:"info"`
	Chart struct {
		Metadata struct {
			Name    string `json:"name"`
			Version string `json:"version"`
		} `json:"metadata"`
	} `json:"chart"`
}

// HelmStorageOf reads one of Helm's release Secrets as `kubectl get secret -o yaml` or the API returns it: the
// labels give the release, revision and status; data.release — base64 (the Secret's encoding) of base64 of the
// gzipped JSON record (Helm's storage/driver encodeRelease) — gives the description, chart and last deployment.
// A Secret of another type is an error; a record that does not decode leaves those fields empty and says why.
func HelmStorageOf(u *unstructured.Unstructured) (HelmStorage, error) {
	if t, _, _ := unstructured.NestedString(u.Object, "type"); t != HelmStorageSecretType {
		return HelmStorage{}, fmt.Errorf("secret %s/%s is of type %q, not %s", u.GetNamespace(), u.GetName(), t, HelmStorageSecretType)
	}
	l := u.GetLabels()
	s := HelmStorage{Secret: u.GetNamespace() + "/" + u.GetName(), Release: l["name"], Status: l["status"]}
	s.Revision, _ = strconv.Atoi(l["version"])
	data, _, _ := unstructured.NestedString(u.Object, "data", "release")
	rel, err := decodeRelease(data)
	if err != nil {
		return s, fmt.Errorf("secret %s: release record: %w", s.Secret, err)
	}
	if rel.Info.Status != "" {
		s.Status = rel.Info.Status
	}
	if s.Release == "" {
		s.Release, s.Revision = rel.Name, rel.Version
	}
	s.Description, s.LastDeployed = rel.Info.Description, rel.Info.LastDeployed
	if m := rel.Chart.Metadata; m.Name != "" {
		s.Chart = m.Name + "@" + m.Version
	}
	return s, nil
}

// decodeRelease decodes a Secret's data.release value into Helm's release record.
func decodeRelease(data string) (*helmRelease, error) {
	if data == "" {
		return nil, fmt.Errorf("no data.release")
	}
	inner, err := base64.StdEncoding.DecodeString(data)
	if err != nil {
		return nil, fmt.Errorf("secret encoding: %w", err)
	}
	raw, err := base64.StdEncoding.DecodeString(string(inner))
	if err != nil {
		return nil, fmt.Errorf("helm encoding: %w", err)
	}
	if len(raw) > 2 && raw[0] == 0x1f && raw[1] == 0x8b { // gzip magic: Helm compresses every record since v3
		zr, err := gzip.NewReader(bytes.NewReader(raw))
		if err != nil {
			return nil, fmt.Errorf("gzip: %w", err)
		}
		if raw, err = io.ReadAll(io.LimitReader(zr, maxReleaseBytes)); err != nil {
			return nil, fmt.Errorf("gzip: %w", err)
		}
	}
	rel := &helmRelease{}
	if err := json.Unmarshal(raw, rel); err != nil {
		return nil, fmt.Errorf("json: %w", err)
	}
	return rel, nil
}

// LatestStorage returns the newest revision of the HelmRelease's Helm release among the storage states found, or
// nil when there is none.
func LatestStorage(hr *helmv2.HelmRelease, found []HelmStorage) *HelmStorage {
	name, ns := StorageRelease(hr)
	var latest *HelmStorage
	for i := range found {
		s := &found[i]
		if s.Release != name || !hasNamespace(s.Secret, ns) {
			continue
		}
		if latest == nil || s.Revision > latest.Revision {
			latest = s
		}
	}
	return latest
}

// StorageRelease returns the Helm release name and storage namespace of a HelmRelease: what its status records
// (helm-controller v1.x), else what its spec gives (GetReleaseName, GetStorageNamespace).
func StorageRelease(hr *helmv2.HelmRelease) (name, namespace string) {
	name, namespace = hr.GetReleaseName(), hr.GetStorageNamespace()
	if l := hr.Status.History.Latest(); l != nil && l.Name != "" {
		name = l.Name
	}
	if hr.Status.StorageNamespace != "" {
		namespace = hr.Status.StorageNamespace
	}
	return name, namespace
}

func hasNamespace(secret, ns string) bool {
	return len(secret) > len(ns) && secret[:len(ns)] == ns && secret[len(ns)] == '/'
}
