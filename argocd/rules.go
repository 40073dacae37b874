package argocd

import (
	"time"

	"github.com/syncmedic/syncmedic"
)

// Evaluate runs every Argo CD rule of the catalog against one application observation.
// TODO(rules helper): implement; the signature is the contract the snapshot reader and the watcher use.
func Evaluate(obs AppObservation, now time.Time, th Thresholds) []syncmedic.Finding {
	return nil
}
