package flux

import (
	"time"

	"github.com/syncmedic/syncmedic"
)

// EvaluateRelease runs every HelmRelease rule of the catalog against one observation.
// TODO(flux helper): implement; the signature is the contract the snapshot reader and the watcher use.
func EvaluateRelease(obs ReleaseObservation, now time.Time, th Thresholds) []syncmedic.Finding {
	return nil
}

// EvaluateCRD runs the CRD storage rule (flux/deprecated-stored-version).
// TODO(flux helper): implement.
func EvaluateCRD(obs CRDObservation, now time.Time) []syncmedic.Finding {
	return nil
}
