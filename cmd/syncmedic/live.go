package main

import (
	"github.com/spf13/cobra"

	"github.com/syncmedic/syncmedic/snapshot"
)

// liveOptions are the flags that point scan, fix and serve at a live Argo CD and cluster.
type liveOptions struct {
	kubeconfig string
}

func addLiveFlags(cmd *cobra.Command, o *liveOptions) {
	cmd.Flags().StringVar(&o.kubeconfig, "kubeconfig", "", "kubeconfig of the cluster to scan live (in-cluster config when running in a Pod)")
}

// liveSources returns the live finding sources the options enable.
func liveSources(o *liveOptions, th snapshot.Thresholds) ([]findingSource, error) {
	return nil, nil
}
