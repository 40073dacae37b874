package flux

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/types"
)

// TestGenerationSeenStartsOverForANewGenerationOrObject: the stale-revision clock of a spec not yet run to success
// starts when the watcher first saw that generation of that object (KustomizationObservation.GenerationSeen), not
// at each evaluation.
func TestGenerationSeenStartsOverForANewGenerationOrObject(t *testing.T) {
	w := &KustomizationWatcher{seen: map[types.NamespacedName]generationSeen{}}
	t0 := time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)
	k := kustomization("apps")
	k.UID = "uid-1"
	require.Equal(t, t0, w.generationSeen(k, t0), "first sight")
	require.Equal(t, t0, w.generationSeen(k, t0.Add(time.Minute)), "the same generation keeps its first sight")

	k.Generation++
	require.Equal(t, t0.Add(2*time.Minute), w.generationSeen(k, t0.Add(2*time.Minute)), "a new generation (resumed, edited) starts over")
	require.Equal(t, t0.Add(2*time.Minute), w.generationSeen(k, t0.Add(3*time.Minute)))

	k.UID = "uid-2"
	require.Equal(t, t0.Add(4*time.Minute), w.generationSeen(k, t0.Add(4*time.Minute)), "a recreated object starts over")

	w.forget(types.NamespacedName{Namespace: k.Namespace, Name: k.Name})
	require.Equal(t, t0.Add(5*time.Minute), w.generationSeen(k, t0.Add(5*time.Minute)), "a deleted object is forgotten")
}
