package incident

import (
	"context"
	"encoding/json"
	"fmt"

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

// LoadSilences reads the ConfigMap's silences.json; a missing ConfigMap or key is none.
func (s *ConfigMapStore) LoadSilences(ctx context.Context) ([]silence.Silence, error) {
	b, err := s.readKey(ctx, ConfigMapSilencesKey)
	if err != nil || b == nil {
		return nil, err
	}
	ss, err := DecodeSilences(b)
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
	return s.writeKey(ctx, ConfigMapSilencesKey, b)
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
