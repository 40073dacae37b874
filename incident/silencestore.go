package incident

import (
	"context"
	"encoding/json"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"

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
	b, err := readIfExists(p)
	if err != nil || b == nil {
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
	return writeAtomic(silencesPath(s.Path), ".syncmedic-silences-*", b)
}

// SilencesConfigMapSuffix ends the name of the ConfigMap store's silences ConfigMap: the state ConfigMap's name and
// this suffix ("syncmedic-state-silences"). Silences have a ConfigMap of their own so that however many there are,
// the incidents still fit in theirs.
const SilencesConfigMapSuffix = "-silences"

// silencesConfigMap is the store of the silences' ConfigMap.
func (s *ConfigMapStore) silencesConfigMap() *ConfigMapStore {
	return &ConfigMapStore{Client: s.Client, Namespace: s.Namespace, Name: s.Name + SilencesConfigMapSuffix}
}

// LoadSilences reads silences.json of the silences' ConfigMap (Name + SilencesConfigMapSuffix). While that ConfigMap
// does not exist, the silences an earlier syncmedic kept in the state ConfigMap's own silences.json are moved there
// (created, then removed from the state ConfigMap), so an upgrade loses none; without either there are none.
func (s *ConfigMapStore) LoadSilences(ctx context.Context) ([]silence.Silence, error) {
	own := s.silencesConfigMap()
	b, found, err := own.get(ctx, ConfigMapSilencesKey)
	if err != nil {
		return nil, err
	}
	if !found {
		if b, err = s.migrateSilences(ctx); err != nil {
			return nil, err
		}
	}
	ss, err := DecodeSilences(b)
	if err != nil {
		return nil, fmt.Errorf("ConfigMap %s/%s key %s: %w", own.Namespace, own.Name, ConfigMapSilencesKey, err)
	}
	return ss, nil
}

// migrateSilences moves the state ConfigMap's silences.json to the silences' ConfigMap and returns it (nil: there
// was none). When another replica created the silences' ConfigMap meanwhile, its silences are returned instead (and
// the state ConfigMap's key is removed all the same).
func (s *ConfigMapStore) migrateSilences(ctx context.Context) ([]byte, error) {
	legacy, err := s.readKey(ctx, ConfigMapSilencesKey)
	if err != nil || len(legacy) == 0 {
		return nil, err
	}
	if _, err := DecodeSilences(legacy); err != nil {
		return nil, fmt.Errorf("ConfigMap %s/%s key %s: %w", s.Namespace, s.Name, ConfigMapSilencesKey, err)
	}
	own := s.silencesConfigMap()
	b := legacy
	switch err := own.create(ctx, ConfigMapSilencesKey, legacy); {
	case apierrors.IsAlreadyExists(err):
		if b, _, err = own.get(ctx, ConfigMapSilencesKey); err != nil {
			return nil, err
		}
	case err != nil:
		return nil, fmt.Errorf("move the silences of ConfigMap %s/%s to their own: %w", s.Namespace, s.Name, err)
	}
	if err := s.dropKey(ctx, ConfigMapSilencesKey); err != nil {
		return nil, fmt.Errorf("silences moved to ConfigMap %s/%s, but: %w", own.Namespace, own.Name, err)
	}
	return b, nil
}

// SaveSilences writes silences.json of the silences' ConfigMap, creating it when it does not exist (the state
// ConfigMap untouched).
func (s *ConfigMapStore) SaveSilences(ctx context.Context, ss []silence.Silence) error {
	b, err := encodeSilences(ss)
	if err != nil {
		return err
	}
	return s.silencesConfigMap().writeKey(ctx, ConfigMapSilencesKey, b)
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
