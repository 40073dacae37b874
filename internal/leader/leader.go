package leader

import (
	"context"
	"errors"
	"log/slog"
	"sync/atomic"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
)

// Options configure an Elector. LeaseDuration, RenewDeadline and RetryPeriod default to 15s, 10s and 2s (the
// Kubernetes controllers' defaults): a leader that dies is replaced within about LeaseDuration, one that stops
// cleanly releases the Lease at once.
type Options struct {
	Client    kubernetes.Interface
	Namespace string
	// Name is the Lease's name.
	Name string
	// Identity names this replica in the Lease (the Pod name).
	Identity      string
	LeaseDuration time.Duration
	RenewDeadline time.Duration
	RetryPeriod   time.Duration
	Log           *slog.Logger
}

// Elector campaigns for the Lease for as long as its context lives, and says whether this replica leads now.
type Elector struct {
	o       Options
	leading atomic.Bool
}

// New returns an Elector; call Run to campaign.
func New(o Options) (*Elector, error) {
	if o.Client == nil || o.Namespace == "" || o.Name == "" || o.Identity == "" {
		return nil, errors.New("leader election needs a client, a namespace, a Lease name and an identity")
	}
	if o.LeaseDuration == 0 {
		o.LeaseDuration = 15 * time.Second
	}
	if o.RenewDeadline == 0 {
		o.RenewDeadline = 10 * time.Second
	}
	if o.RetryPeriod == 0 {
		o.RetryPeriod = 2 * time.Second
	}
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	return &Elector{o: o}, nil
}

// IsLeader reports whether this replica holds the Lease.
func (e *Elector) IsLeader() bool { return e.leading.Load() }

// Run campaigns until ctx is cancelled, campaigning again after losing the Lease; on return the Lease is released.
func (e *Elector) Run(ctx context.Context) error {
	lock := &resourcelock.LeaseLock{
		LeaseMeta:  metav1.ObjectMeta{Namespace: e.o.Namespace, Name: e.o.Name},
		Client:     e.o.Client.CoordinationV1(),
		LockConfig: resourcelock.ResourceLockConfig{Identity: e.o.Identity},
	}
	le, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
		Lock: lock, Name: e.o.Name, ReleaseOnCancel: true,
		LeaseDuration: e.o.LeaseDuration, RenewDeadline: e.o.RenewDeadline, RetryPeriod: e.o.RetryPeriod,
		Callbacks: leaderelection.LeaderCallbacks{
			OnStartedLeading: func(context.Context) {
				e.leading.Store(true)
				e.o.Log.Info("leading: this replica remediates and notifies", "lease", e.o.Namespace+"/"+e.o.Name, "identity", e.o.Identity)
			},
			OnStoppedLeading: func() {
				e.leading.Store(false)
				e.o.Log.Info("not leading: this replica only evaluates", "lease", e.o.Namespace+"/"+e.o.Name, "identity", e.o.Identity)
			},
			OnNewLeader: func(id string) {
				if id != e.o.Identity {
					e.o.Log.Info("another replica leads", "leader", id)
				}
			},
		},
	})
	if err != nil {
		return err
	}
	for ctx.Err() == nil {
		le.Run(ctx) // returns when leadership is lost or ctx ends
	}
	e.leading.Store(false)
	return nil
}
