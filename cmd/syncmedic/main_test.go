package main

import (
	"testing"

	"github.com/syncmedic/syncmedic/internal/testenv"
)

// TestMain stops the control plane (kube-apiserver, etcd, redis, argocd-server) the live tests start.
func TestMain(m *testing.M) { testenv.Main(m) }
