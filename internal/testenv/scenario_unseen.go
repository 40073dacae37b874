package testenv

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// The fast-Job race (argo-cd #21055) on a real node. With the played kubelet a PodSucceedsUnseen hook's Pod exits
// within milliseconds of its creation, while the application-controller is still in the sync pass that created the
// Job: with ttlSecondsAfterFinished: 0 the Job completes and the TTL controller deletes it before the controller's
// next look, every time. On the node the container needs seconds to start; the controller is idle by then, and the
// Job's update to Complete makes it refresh the application and run the operation (handleObjectUpdated →
// requestAppRefresh → processAppRefreshQueueItem → appOperationQueue) at once, which usually reads the Job
// complete before the TTL controller's delete (seen on v2.14.21: it then records the hook Succeeded). So the node
// gets the timing from the test, as a busy controller gives it: the container waits for its release file, and the
// race loser pauses the controller (SIGSTOP), releases the container, waits until the TTL controller's deletion
// went through and resumes the controller.

// raceLoseWait bounds how long the race loser waits for a released hook Job to be deleted (its container exits,
// the Job controller completes it, the TTL controller deletes it, the garbage collector removes its Pod).
const raceLoseWait = 2 * time.Minute

// unseenRelease is the release file of a PodSucceedsUnseen hook's container on a real node.
func unseenRelease(dir, name string) string { return filepath.Join(dir, name+".unseen") }

// loseRaces starts the race loser of the app on a real node for the PodSucceedsUnseen hooks whose Job names
// (a generateName hook's generated names included) start with one of prefixes; it runs until the test ends. Each
// new start of such a hook's container (a new line in its runs file) is let exit with the application-controller
// paused, which resumes once the hook's Job is gone or held by a finalizer other than the garbage collector's.
func (a *RealHookApp) loseRaces(t testing.TB, prefixes ...string) {
	t.Helper()
	if a.Node == nil || len(prefixes) == 0 {
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	errs := make(chan error, 1)
	wg.Add(1)
	go func() {
		defer wg.Done()
		if err := a.runRaceLoser(ctx, prefixes); err != nil && ctx.Err() == nil {
			errs <- err
		}
	}()
	t.Cleanup(func() {
		cancel()
		wg.Wait()
		select {
		case err := <-errs:
			t.Errorf("testenv: the race loser of %s: %v", a.Name, err)
		default:
		}
	})
}

// runRaceLoser polls the runs files of prefixes and loses each new run's race, one at a time, until ctx ends.
func (a *RealHookApp) runRaceLoser(ctx context.Context, prefixes []string) error {
	handled := map[string]int{}
	for {
		for _, prefix := range prefixes {
			runs, err := HookRuns(a.HostDir, prefix)
			if err != nil {
				return err
			}
			for handled[prefix] < len(runs) {
				if err := a.loseOneRace(ctx, prefix); err != nil {
					return fmt.Errorf("run %d of hook %s: %w", handled[prefix]+1, prefix, err)
				}
				handled[prefix]++
			}
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// loseOneRace pauses the controller, releases the running container of hook prefix, waits until its Job is
// deleted, takes the release back for the next run, and resumes the controller.
func (a *RealHookApp) loseOneRace(ctx context.Context, prefix string) (err error) {
	resume, err := a.Stack.pauseController()
	if err != nil {
		return err
	}
	defer func() {
		if rerr := resume(); err == nil {
			err = rerr
		}
	}()
	release := unseenRelease(a.HostDir, prefix)
	if err := os.WriteFile(release, nil, 0o644); err != nil {
		return fmt.Errorf("releasing the container: %w", err)
	}
	defer func() {
		if rerr := os.Remove(release); err == nil && rerr != nil {
			err = fmt.Errorf("taking the release back: %w", rerr)
		}
	}()
	for deadline := time.Now().Add(raceLoseWait); ; {
		done, err := a.unseenJobsDeleted(ctx, prefix)
		if err != nil || done {
			return err
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("its Job was not deleted within %s of its container's release", raceLoseWait)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// unseenJobsDeleted reports whether every Job of hook prefix in the app's namespace is gone or being deleted and held
// by a finalizer other than the garbage collector's (Argo CD v3's hook finalizer): what the controller sees once it
// resumes.
func (a *RealHookApp) unseenJobsDeleted(ctx context.Context, prefix string) (bool, error) {
	var jobs batchv1.JobList
	if err := a.Stack.Env.Client.List(ctx, &jobs, client.InNamespace(a.Namespace)); err != nil {
		return false, fmt.Errorf("listing the Jobs of %s: %w", a.Namespace, err)
	}
	for _, job := range jobs.Items {
		if !strings.HasPrefix(job.Name, prefix) {
			continue
		}
		if job.DeletionTimestamp == nil || len(withoutCollector(job.Finalizers)) == 0 {
			return false, nil
		}
	}
	return true, nil
}

// pauseController is PauseController for a goroutine of a test: errors are returned, and the caller must resume.
func (s *RealArgoCD) pauseController() (resume func() error, err error) {
	pid := s.pids["argocd-application-controller"]
	if pid == 0 {
		return nil, fmt.Errorf("the %s application-controller's process is unknown", s.Version)
	}
	if err := syscall.Kill(-pid, syscall.SIGSTOP); err != nil {
		return nil, fmt.Errorf("pausing the %s application-controller: %w", s.Version, err)
	}
	var once sync.Once
	return func() (err error) {
		once.Do(func() {
			if kerr := syscall.Kill(-pid, syscall.SIGCONT); kerr != nil {
				err = fmt.Errorf("resuming the %s application-controller: %w", s.Version, kerr)
			}
		})
		return err
	}, nil
}
