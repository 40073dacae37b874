package incident

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/retry"

	"github.com/syncmedic/syncmedic/silence"
)

// Store persists the tracker's incidents so a restart neither announces an open incident again nor forgets it.
type Store interface {
	// Load returns every stored incident; an empty store returns nothing and no error.
	Load(ctx context.Context) ([]Incident, error)
	// Save replaces the stored incidents.
	Save(ctx context.Context, incidents []Incident) error
}

// storeDocument is the persisted form, versioned so a later format can still read it.
type storeDocument struct {
	Version   int        `json:"version"`
	Incidents []Incident `json:"incidents"`
}

const storeVersion = 1

func decodeStore(b []byte) ([]Incident, error) {
	if len(b) == 0 {
		return nil, nil
	}
	var d storeDocument
	if err := json.Unmarshal(b, &d); err != nil {
		return nil, fmt.Errorf("decode incidents: %w", err)
	}
	if d.Version != storeVersion {
		return nil, fmt.Errorf("incident store version %d: this syncmedic reads version %d", d.Version, storeVersion)
	}
	return d.Incidents, nil
}

func encodeStore(incidents []Incident) ([]byte, error) {
	if incidents == nil {
		incidents = []Incident{}
	}
	return json.Marshal(storeDocument{Version: storeVersion, Incidents: incidents})
}

// FileStore keeps incidents in a JSON file (for the CLI). Saves are atomic (write then rename).
type FileStore struct {
	Path string
}

var _ Store = (*FileStore)(nil)

// Load reads the file; a missing file is an empty store.
func (s *FileStore) Load(_ context.Context) ([]Incident, error) {
	b, err := readIfExists(s.Path)
	if err != nil || b == nil {
		return nil, err
	}
	inc, err := decodeStore(b)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", s.Path, err)
	}
	return inc, nil
}

// Save writes the file atomically.
func (s *FileStore) Save(_ context.Context, incidents []Incident) error {
	b, err := encodeStore(incidents)
	if err != nil {
		return err
	}
	return writeAtomic(s.Path, ".syncmedic-state-*", b)
}

// readIfExists returns the file's content; nil (and no error) when it does not exist.
func readIfExists(path string) ([]byte, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	return b, err
}

// writeAtomic writes b to path through a temporary file of pattern in the same directory, renamed over path, so a
// reader sees the old content or the new, never a part.
func writeAtomic(path, pattern string, b []byte) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), pattern)
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(b); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}

var (
	_ AttemptMerger = (*FileStore)(nil)
	_ AttemptMerger = (*ConfigMapStore)(nil)
	_ AttemptMerger = (*MemoryStore)(nil)
)

// MergeAttempt rewrites the file with a merged into incident id (see AttemptMerger).
func (s *FileStore) MergeAttempt(ctx context.Context, id string, a Attempt) (bool, error) {
	incs, err := s.Load(ctx)
	if err != nil || !mergeAttempt(incs, id, a) {
		return false, err
	}
	return true, s.Save(ctx, incs)
}

// MergeAttempt writes a into incident id of the ConfigMap (see AttemptMerger), with the ConfigMap's
// resourceVersion: a concurrent save by the leader is read again and merged, never overwritten.
func (s *ConfigMapStore) MergeAttempt(ctx context.Context, id string, a Attempt) (bool, error) {
	cms := s.Client.CoreV1().ConfigMaps(s.Namespace)
	found := false
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cm, err := cms.Get(ctx, s.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		incs, err := decodeStore([]byte(cm.Data[ConfigMapDataKey]))
		if err != nil {
			return err
		}
		if found = mergeAttempt(incs, id, a); !found {
			return nil
		}
		b, err := encodeStore(incs)
		if err != nil {
			return err
		}
		cm.Data[ConfigMapDataKey] = string(b)
		_, err = cms.Update(ctx, cm, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		return false, fmt.Errorf("merge an attempt into ConfigMap %s/%s: %w", s.Namespace, s.Name, err)
	}
	return found, nil
}

// MergeAttempt writes a into incident id (see AttemptMerger).
func (s *MemoryStore) MergeAttempt(_ context.Context, id string, a Attempt) (bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	incs := make([]Incident, len(s.incidents))
	for i := range s.incidents {
		incs[i] = s.incidents[i].Clone()
	}
	if !mergeAttempt(incs, id, a) {
		return false, nil
	}
	s.incidents = incs
	return true, nil
}

// ConfigMapDataKey is the key of the ConfigMap store's data that holds the incidents.
const ConfigMapDataKey = "incidents.json"

// ConfigMapSilencesKey is the key of the silences' ConfigMap (ConfigMapStore.LoadSilences) that holds them; the state
// ConfigMap held them under the same key before they had their own.
const ConfigMapSilencesKey = "silences.json"

// ConfigMapStore keeps incidents in a ConfigMap (for serve), creating it on first save.
type ConfigMapStore struct {
	Client    kubernetes.Interface
	Namespace string
	Name      string
}

var _ Store = (*ConfigMapStore)(nil)

// Load reads the ConfigMap; a missing ConfigMap is an empty store.
func (s *ConfigMapStore) Load(ctx context.Context) ([]Incident, error) {
	b, err := s.readKey(ctx, ConfigMapDataKey)
	if err != nil || b == nil {
		return nil, err
	}
	inc, err := decodeStore(b)
	if err != nil {
		return nil, fmt.Errorf("ConfigMap %s/%s key %s: %w", s.Namespace, s.Name, ConfigMapDataKey, err)
	}
	return inc, nil
}

// Save writes the ConfigMap's incidents (its other keys untouched), creating the ConfigMap when it does not exist.
func (s *ConfigMapStore) Save(ctx context.Context, incidents []Incident) error {
	b, err := encodeStore(incidents)
	if err != nil {
		return err
	}
	return s.writeKey(ctx, ConfigMapDataKey, b)
}

// readKey returns the ConfigMap's key; nil when the ConfigMap does not exist (an empty store).
func (s *ConfigMapStore) readKey(ctx context.Context, key string) ([]byte, error) {
	b, _, err := s.get(ctx, key)
	return b, err
}

// get returns the ConfigMap's key, and whether the ConfigMap exists.
func (s *ConfigMapStore) get(ctx context.Context, key string) ([]byte, bool, error) {
	cm, err := s.Client.CoreV1().ConfigMaps(s.Namespace).Get(ctx, s.Name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, fmt.Errorf("read ConfigMap %s/%s: %w", s.Namespace, s.Name, err)
	}
	return []byte(cm.Data[key]), true, nil
}

// create creates the ConfigMap with the one key; the apiserver's error as is (AlreadyExists when it exists).
func (s *ConfigMapStore) create(ctx context.Context, key string, b []byte) error {
	cm := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: s.Name, Namespace: s.Namespace,
			Labels: map[string]string{"app.kubernetes.io/name": "syncmedic", "app.kubernetes.io/component": "state"}},
		Data: map[string]string{key: string(b)},
	}
	_, err := s.Client.CoreV1().ConfigMaps(s.Namespace).Create(ctx, cm, metav1.CreateOptions{})
	return err
}

// dropKey removes the key from the ConfigMap, if it is there; a concurrent update of the ConfigMap is retried.
func (s *ConfigMapStore) dropKey(ctx context.Context, key string) error {
	cms := s.Client.CoreV1().ConfigMaps(s.Namespace)
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cm, err := cms.Get(ctx, s.Name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		if err != nil {
			return err
		}
		if _, ok := cm.Data[key]; !ok {
			return nil
		}
		delete(cm.Data, key)
		_, err = cms.Update(ctx, cm, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		return fmt.Errorf("remove key %s from ConfigMap %s/%s: %w", key, s.Namespace, s.Name, err)
	}
	return nil
}

// writeKey sets the ConfigMap's key to b and leaves its other keys as they are, creating the ConfigMap when it does
// not exist.
func (s *ConfigMapStore) writeKey(ctx context.Context, key string, b []byte) error {
	cms := s.Client.CoreV1().ConfigMaps(s.Namespace)
	cm, err := cms.Get(ctx, s.Name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		if err := s.create(ctx, key, b); err != nil {
			return fmt.Errorf("create ConfigMap %s/%s: %w", s.Namespace, s.Name, err)
		}
		return nil
	}
	if err != nil {
		return fmt.Errorf("read ConfigMap %s/%s: %w", s.Namespace, s.Name, err)
	}
	if cm.Data == nil {
		cm.Data = map[string]string{}
	}
	cm.Data[key] = string(b)
	if _, err := cms.Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
		return fmt.Errorf("update ConfigMap %s/%s: %w", s.Namespace, s.Name, err)
	}
	return nil
}

// MemoryStore keeps incidents in memory (tests, and serve without a state location).
type MemoryStore struct {
	mu        sync.Mutex
	incidents []Incident
	silences  []silence.Silence
}

var _ Store = (*MemoryStore)(nil)

// Load returns a copy of what Save stored, as a store that decodes would (monotonic clock readings stripped).
func (s *MemoryStore) Load(context.Context) ([]Incident, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]Incident, len(s.incidents))
	for i := range s.incidents {
		out[i] = s.incidents[i].Clone()
		out[i].stripMonotonic()
	}
	return out, nil
}

// Save keeps incidents, which the caller must not change afterwards (the tracker saves copies). It does not encode
// them: the tracker saves on every change, and encoding every incident each time made an in-memory tracker's cost
// grow with the number of open incidents.
func (s *MemoryStore) Save(_ context.Context, incidents []Incident) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.incidents = incidents
	return nil
}
