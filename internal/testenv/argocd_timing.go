package testenv

import (
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/syncmedic/syncmedic/internal/argoapi/v1alpha1"
)

// PauseController stops the stack's argocd-application-controller (SIGSTOP to its process group) so that a test can
// control the timing of a race the controller loses only when it does not look — a hook Job that completes and is
// deleted by its TTL before the controller sees it finish — instead of hoping the machine's load plays it. The
// returned resume continues the controller (SIGCONT); it runs when the test ends too, and is safe to call again.
// The stack is shared by the tests of the binary: keep the pause short (seconds), as a load spike would be, unless
// the stack is the test's own (ArgoCDStackOptions.Own).
func (s *RealArgoCD) PauseController(t testing.TB) (resume func()) {
	t.Helper()
	pid := s.pids["argocd-application-controller"]
	if pid == 0 {
		t.Fatalf("testenv: the %s application-controller's process is unknown", s.Version)
	}
	if err := syscall.Kill(-pid, syscall.SIGSTOP); err != nil {
		t.Fatalf("testenv: pausing the %s application-controller: %v", s.Version, err)
	}
	var once sync.Once
	resume = func() {
		once.Do(func() {
			if err := syscall.Kill(-pid, syscall.SIGCONT); err != nil {
				t.Errorf("testenv: resuming the %s application-controller: %v", s.Version, err)
			}
		})
	}
	t.Cleanup(resume)
	return resume
}

// ScenarioRealHookRunning creates an app named name with the one hook (its Run should hold its Pod, e.g.
// PodRunsUntilReleased, so the test decides when it finishes), syncs it, and returns once the operation is Running
// and waiting for that hook, with the time the sync started.
func ScenarioRealHookRunning(t testing.TB, stack *RealArgoCD, name string, hook RealHook) (*RealHookApp, time.Time) {
	t.Helper()
	app := NewRealHookApp(t, stack, name, ConfigMapData{}, hook)
	start := time.Now()
	app.Sync(t)
	if got, ok := app.WaitApp(t, 2*time.Minute, func(app *v1alpha1.Application) bool {
		return OperationRunningSince(start)(app) && strings.Contains(app.Status.OperationState.Message, hook.Name)
	}); !ok {
		t.Fatalf("testenv: the sync of %s is not waiting for its hook %s after 2m: %s", app.Name, hook.Name, DescribeOperation(got))
	}
	return app, start
}
