package incident

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/syncmedic/syncmedic/silence"
)

// silenceDocument is the persisted form of the silences, versioned like the incidents'.
type silenceDocument struct {
	Version  int               `json:"version"`
	Silences []silence.Silence `json:"silences"`
}

const silenceStoreVersion = 1

// DecodeSilences reads stored silences (the ConfigMap store's silences.json, the file store's .silences file).
func DecodeSilences(b []byte) ([]silence.Silence, error) {
	if len(b) == 0 {
		return nil, nil
	}
	var d silenceDocument
	if err := json.Unmarshal(b, &d); err != nil {
		return nil, fmt.Errorf("decode silences: %w", err)
	}
	if d.Version != silenceStoreVersion {
		return nil, fmt.Errorf("silence store version %d: this syncmedic reads version %d", d.Version, silenceStoreVersion)
	}
	return d.Silences, nil
}

func encodeSilences(ss []silence.Silence) ([]byte, error) {
	if ss == nil {
		ss = []silence.Silence{}
	}
	return json.Marshal(silenceDocument{Version: silenceStoreVersion, Silences: ss})
}

var (
	_ SilenceStore = (*FileStore)(nil)
	_ SilenceStore = (*ConfigMapStore)(nil)
	_ SilenceStore = (*MemoryStore)(nil)
)

// LoadSilences reads the silences file next to the incidents (Path + ".silences"); a missing file is none.
func (s *FileStore) LoadSilences(_ context.Context) ([]silence.Silence, error) {
	p := silencesPath(s.Path)
	b, err := os.ReadFile(p)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	ss, err := DecodeSilences(b)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", p, err)
	}
	return ss, nil
}

// SaveSilences writes the silences file atomically.
func (s *FileStore) SaveSilences(_ context.Context, ss []silence.Silence) error {
	b, err := encodeSilences(ss)
	if err != nil {
		return err
	}
	p := silencesPath(s.Path)
	tmp, err := os.CreateTemp(filepath.Dir(p), ".syncmedic-silences-*")
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
	return os.Rename(tmp.Name(), p)
}

// LoadSilences reads the ConfigMap's silences.json; a missing ConfigMap or key is none.
func (s *ConfigMapStore) LoadSilences(ctx context.Context) ([]silence.Silence, error) {
	cm, err := s.Client.CoreV1().ConfigMaps(s.Namespace).Get(ctx, s.Name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read ConfigMap %s/%s: %w", s.Namespace, s.Name, err)
	}
	ss, err := DecodeSilences([]byte(cm.Data[ConfigMapSilencesKey]))
	if err != nil {
		return nil, fmt.Errorf("ConfigMap %s/%s key %s: %w", s.Namespace, s.Name, ConfigMapSilencesKey, err)
	}
	return ss, nil
}

// SaveSilences writes the ConfigMap's silences.json (the incidents' key untouched), creating the ConfigMap when it
// does not exist.
func (s *ConfigMapStore) SaveSilences(ctx context.Context, ss []silence.Silence) error {
	b, err := encodeSilences(ss)
	if err != nil {
		return err
	}
	cms := s.Client.CoreV1().ConfigMaps(s.Namespace)
	cm, err := cms.Get(ctx, s.Name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		cm = &corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Name: s.Name, Namespace: s.Namespace,
				Labels: map[string]string{"app.kubernetes.io/name": "syncmedic", "app.kubernetes.io/component": "state"}},
			Data: map[string]string{ConfigMapSilencesKey: string(b)},
		}
		if _, err := cms.Create(ctx, cm, metav1.CreateOptions{}); err != nil {
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
	cm.Data[ConfigMapSilencesKey] = string(b)
	if _, err := cms.Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
		return fmt.Errorf("update ConfigMap %s/%s: %w", s.Namespace, s.Name, err)
	}
	return nil
}

// LoadSilences returns a copy of what SaveSilences stored, monotonic clock readings stripped.
func (s *MemoryStore) LoadSilences(context.Context) ([]silence.Silence, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]silence.Silence, len(s.silences))
	for i := range s.silences {
		out[i] = s.silences[i].Clone()
		out[i].StartsAt, out[i].EndsAt, out[i].UpdatedAt = out[i].StartsAt.Round(0), out[i].EndsAt.Round(0), out[i].UpdatedAt.Round(0)
	}
	return out, nil
}

// SaveSilences keeps the silences, which the caller must not change afterwards.
func (s *MemoryStore) SaveSilences(_ context.Context, ss []silence.Silence) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.silences = ss
	return nil
}
