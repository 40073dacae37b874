package kube

import (
	"time"

	"github.com/syncmedic/syncmedic"
)

// Evaluate runs every cluster rule of the catalog (webhooks, stuck terminating, Argo Workflows) over inv.
// TODO(rules helper): implement; the signature is the contract the snapshot reader and the scanner use.
func Evaluate(inv Inventory, now time.Time, th Thresholds) []syncmedic.Finding {
	return nil
}
