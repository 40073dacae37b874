package testenv

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/retry"
)

// PodDecision says what the kubelet does with a Pod: move it to Phase when Act is true, leave it as it is otherwise.
type PodDecision func(pod *corev1.Pod) (phase corev1.PodPhase, act bool)

// Kubelet plays the kubelet for the Pods of one namespace: it moves every Pod its decision selects to the chosen
// phase through the status subresource, Running first, as a kubelet reports a container that starts and exits. It is
// the only part of a node the tests play; Jobs, TTL and garbage collection are the real controllers'
// (KubeWithControllers). Scenarios whose timing must be the node's own run on the real node instead (RealNode,
// RealNodeWhileUsed: RealHookApp runs its hooks there as containers); the played kubelet stays for the scenarios
// that choose each Pod's outcome and moment.
type Kubelet struct {
	env       *Env
	namespace string
	decide    PodDecision
	informer  cache.SharedIndexInformer
	queue     chan string
	errs      chan error
}

// Kubelet starts a kubelet for namespace until the test ends. decide is called for every Pod, existing and new, on
// every change; call Poke after changing what decide answers, to re-evaluate the Pods that did not change.
func (e *Env) Kubelet(t testing.TB, namespace string, decide PodDecision) *Kubelet {
	t.Helper()
	factory := informers.NewSharedInformerFactoryWithOptions(e.Clientset, 0, informers.WithNamespace(namespace))
	k := &Kubelet{env: e, namespace: namespace, decide: decide, informer: factory.Core().V1().Pods().Informer(),
		queue: make(chan string, 1024), errs: make(chan error, 16)}
	enqueue := func(obj any) {
		if pod, ok := obj.(*corev1.Pod); ok {
			k.queue <- pod.Name
		}
	}
	if _, err := k.informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: enqueue, UpdateFunc: func(_, obj any) { enqueue(obj) },
	}); err != nil {
		t.Fatalf("testenv: kubelet: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); k.informer.Run(ctx.Done()) }()
	go func() {
		defer wg.Done()
		for {
			select {
			case <-ctx.Done():
				return
			case name := <-k.queue:
				if err := k.sync(ctx, name); err != nil && ctx.Err() == nil {
					select {
					case k.errs <- err:
					default:
					}
				}
			}
		}
	}()
	t.Cleanup(func() {
		cancel()
		wg.Wait()
		select {
		case err := <-k.errs:
			t.Errorf("testenv: kubelet in %s: %v", namespace, err)
		default:
		}
	})
	if !cache.WaitForCacheSync(ctx.Done(), k.informer.HasSynced) {
		t.Fatalf("testenv: kubelet: the Pod informer of %s did not sync", namespace)
	}
	return k
}

// Poke re-evaluates every Pod of the namespace (after the test changed what decide answers).
func (k *Kubelet) Poke() {
	for _, obj := range k.informer.GetStore().List() {
		if pod, ok := obj.(*corev1.Pod); ok {
			k.queue <- pod.Name
		}
	}
}

func (k *Kubelet) sync(ctx context.Context, name string) error {
	obj, exists, err := k.informer.GetStore().GetByKey(k.namespace + "/" + name)
	if err != nil || !exists {
		return err
	}
	pod := obj.(*corev1.Pod)
	phase, act := k.decide(pod)
	if !act || pod.Status.Phase == phase || pod.DeletionTimestamp != nil {
		return nil
	}
	return setPodPhase(ctx, k.env, k.namespace, name, phase)
}

// SetPodPhase moves one Pod to phase now, as the kubelet would report it (Running first when it is Pending).
func (e *Env) SetPodPhase(t testing.TB, namespace, name string, phase corev1.PodPhase) {
	t.Helper()
	if err := setPodPhase(context.Background(), e, namespace, name, phase); err != nil {
		t.Fatalf("testenv: setting Pod %s/%s to %s: %v", namespace, name, phase, err)
	}
}

func setPodPhase(ctx context.Context, e *Env, namespace, name string, phase corev1.PodPhase) error {
	pods := e.Clientset.CoreV1().Pods(namespace)
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		pod, err := pods.Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return nil // deleted meanwhile (TTL, garbage collection): nothing left to run
		}
		if err != nil {
			return err
		}
		if isTerminal(pod.Status.Phase) {
			if pod.Status.Phase == phase {
				return nil
			}
			return fmt.Errorf("pod is already %s", pod.Status.Phase)
		}
		if pod.Status.Phase != corev1.PodRunning && phase != corev1.PodRunning && phase != corev1.PodPending {
			// A kubelet reports the container running before it reports it exited.
			markPod(pod, corev1.PodRunning)
			// hand-written state: the kubelet stand-in (no kubelet runs: docs/development.md, "What is real") reports the container
			// running first.
			if pod, err = pods.UpdateStatus(ctx, pod, metav1.UpdateOptions{}); err != nil {
				return err
			}
		}
		markPod(pod, phase)
		// hand-written state: the kubelet stand-in reports the phase the test decided.
		_, err = pods.UpdateStatus(ctx, pod, metav1.UpdateOptions{})
		return err
	})
}

func isTerminal(p corev1.PodPhase) bool { return p == corev1.PodSucceeded || p == corev1.PodFailed }

// markPod sets the phase, the Ready condition and one status per container, terminated with exit code 0 or 1 for
// the terminal phases, as the kubelet reports them.
func markPod(pod *corev1.Pod, phase corev1.PodPhase) {
	now := metav1.NewTime(time.Now())
	pod.Status.Phase = phase
	if pod.Status.StartTime == nil {
		pod.Status.StartTime = &now
	}
	ready := corev1.ConditionFalse
	if phase == corev1.PodRunning {
		ready = corev1.ConditionTrue
	}
	pod.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: ready, LastTransitionTime: now}}
	pod.Status.ContainerStatuses = nil
	for _, c := range pod.Spec.Containers {
		st := corev1.ContainerStatus{Name: c.Name, Image: c.Image, Ready: phase == corev1.PodRunning}
		switch phase {
		case corev1.PodRunning:
			st.State.Running = &corev1.ContainerStateRunning{StartedAt: now}
			st.Started = ptrTrue()
		case corev1.PodSucceeded, corev1.PodFailed:
			code := int32(0)
			reason := "Completed"
			if phase == corev1.PodFailed {
				code, reason = 1, "Error"
			}
			st.State.Terminated = &corev1.ContainerStateTerminated{ExitCode: code, Reason: reason, StartedAt: now,
				FinishedAt: now}
		}
		pod.Status.ContainerStatuses = append(pod.Status.ContainerStatuses, st)
	}
}

func ptrTrue() *bool { b := true; return &b }
