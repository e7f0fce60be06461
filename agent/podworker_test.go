//go:build linux

package agent

import (
	"context"
	"errors"
	"slices"
	"sync"
	"syscall"
	"testing"
	"testing/synctest"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/utils/ptr"
)

// loopBed drives one agent's pod loop with a fake API, runtime and network,
// inside a synctest bubble: time moves only when every goroutine waits.
type loopBed struct {
	t      *testing.T
	ctx    context.Context
	a      *Agent
	client *fake.Clientset
	rtm    *fakeRuntime
	net    *fakeNetwork
}

func newLoopBed(t *testing.T, rtm *fakeRuntime) *loopBed {
	a, client, fn := testAgent(t, rtm)
	a.net = fn
	ctx, cancel := context.WithCancel(t.Context())
	t.Cleanup(func() {
		cancel()
		a.wg.Wait()
		rtm.exitAll()
	})
	return &loopBed{t: t, ctx: ctx, a: a, client: client, rtm: rtm, net: fn}
}

// apply stores pod in the API and the agent's cache, sends the agent its
// event, and waits until the agent has done what it does at once.
func (b *loopBed) apply(pod *corev1.Pod) {
	b.t.Helper()
	pods := b.client.CoreV1().Pods(pod.Namespace)
	pod = pod.DeepCopy()
	if cur, err := pods.Get(b.ctx, pod.Name, metav1.GetOptions{}); apierrors.IsNotFound(err) {
		if _, err := pods.Create(b.ctx, pod, metav1.CreateOptions{}); err != nil {
			b.t.Fatal(err)
		}
	} else {
		// As the API server does, an update of the pod keeps its status.
		pod.Status = cur.Status
		if _, err := pods.Update(b.ctx, pod, metav1.UpdateOptions{}); err != nil {
			b.t.Fatal(err)
		}
	}
	if err := b.a.podFactory.Core().V1().Pods().Informer().GetIndexer().Update(pod); err != nil {
		b.t.Fatal(err)
	}
	b.a.podEvent(b.ctx, pod)
	synctest.Wait()
}

// status is the pod's status in the API.
func (b *loopBed) status(pod *corev1.Pod) corev1.PodStatus {
	b.t.Helper()
	got, err := b.client.CoreV1().Pods(pod.Namespace).Get(b.ctx, pod.Name, metav1.GetOptions{})
	if err != nil {
		b.t.Fatal(err)
	}
	return got.Status
}

// appState is the app container's state in the API, as kubectl shows it.
func (b *loopBed) appState(pod *corev1.Pod) (string, int32) {
	b.t.Helper()
	st := b.status(pod)
	if len(st.ContainerStatuses) != 1 {
		b.t.Fatalf("container statuses: got %d, want 1", len(st.ContainerStatuses))
	}
	return stateOf(st.ContainerStatuses[0]), st.ContainerStatuses[0].RestartCount
}

func TestPodLoopStartsPodOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := newLoopBed(t, &fakeRuntime{})
		pod := sleeper("web", corev1.RestartPolicyAlways)
		b.apply(pod)
		b.apply(pod.DeepCopy()) // an update that changes nothing
		time.Sleep(time.Minute)
		synctest.Wait()
		if got := len(b.rtm.sandboxes()); got != 1 {
			t.Errorf("sandboxes started: got %d, want 1", got)
		}
		if got := len(b.rtm.containers()); got != 1 {
			t.Errorf("container runs: got %d, want 1", got)
		}
		st := b.status(pod)
		if st.Phase != corev1.PodRunning || st.PodIP != "10.244.0.5" {
			t.Errorf("status: got phase %s, pod IP %q; want Running, 10.244.0.5", st.Phase, st.PodIP)
		}
		if state, restarts := b.appState(pod); state != "running" || restarts != 0 {
			t.Errorf("app: got %s with %d restarts, want running with 0", state, restarts)
		}
	})
}

// A crashed container restarts under restartPolicy Always, at once the
// first time and then after kubelet's back-off (10 s, doubling); under
// Never it stays down and the pod fails.
func TestPodLoopRestartsCrashedContainer(t *testing.T) {
	t.Run("Always", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			b := newLoopBed(t, &fakeRuntime{})
			pod := sleeper("web", corev1.RestartPolicyAlways)
			b.apply(pod)
			b.rtm.containers()[0].exit(1)
			synctest.Wait()
			if got := len(b.rtm.containers()); got != 2 {
				t.Fatalf("runs after the first crash: got %d, want 2 (restarted at once)", got)
			}
			time.Sleep(time.Minute) // ran long enough for the next restart to wait
			b.rtm.containers()[1].exit(1)
			synctest.Wait()
			if state, restarts := b.appState(pod); state != "waiting/CrashLoopBackOff" || restarts != 1 {
				t.Errorf("app in back-off: got %s with %d restarts, want waiting/CrashLoopBackOff with 1", state, restarts)
			}
			time.Sleep(9 * time.Second)
			synctest.Wait()
			if got := len(b.rtm.containers()); got != 2 {
				t.Fatalf("runs 9s into a 10s back-off: got %d, want 2", got)
			}
			time.Sleep(time.Second)
			synctest.Wait()
			if got := len(b.rtm.containers()); got != 3 {
				t.Fatalf("runs after the back-off: got %d, want 3", got)
			}
			if state, restarts := b.appState(pod); state != "running" || restarts != 2 {
				t.Errorf("app: got %s with %d restarts, want running with 2", state, restarts)
			}
		})
	})
	t.Run("Never", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			b := newLoopBed(t, &fakeRuntime{})
			pod := sleeper("job", corev1.RestartPolicyNever)
			b.apply(pod)
			b.rtm.containers()[0].exit(1)
			synctest.Wait()
			time.Sleep(10 * time.Minute)
			synctest.Wait()
			if got := len(b.rtm.containers()); got != 1 {
				t.Errorf("runs: got %d, want 1 (never restarted)", got)
			}
			if st := b.status(pod); st.Phase != corev1.PodFailed {
				t.Errorf("phase: got %s, want Failed", st.Phase)
			}
			if state, restarts := b.appState(pod); state != "terminated/Error" || restarts != 0 {
				t.Errorf("app: got %s with %d restarts, want terminated/Error with 0", state, restarts)
			}
			if sb := b.rtm.sandboxes()[0]; !slices.Contains(sb.signals(), syscall.SIGKILL) {
				t.Errorf("sandbox of the failed pod: got signals %v, want SIGKILL (torn down)", sb.signals())
			}
		})
	})
}

// A pod being deleted gets SIGTERM, and SIGKILL only once its grace
// period has passed; then its address is freed and the agent deletes it
// from the API for good.
func TestPodLoopStopsDeletedPodWithinGrace(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := newLoopBed(t, &fakeRuntime{ignoreTerm: true})
		pod := sleeper("web", corev1.RestartPolicyAlways)
		pod.Spec.TerminationGracePeriodSeconds = ptr.To[int64](30)
		b.apply(pod)
		app := b.rtm.containers()[0]

		deleting := pod.DeepCopy()
		deleting.DeletionTimestamp = ptr.To(metav1.Now())
		deleting.DeletionGracePeriodSeconds = ptr.To[int64](20)
		b.apply(deleting)
		if got := app.signals(); !slices.Equal(got, []syscall.Signal{syscall.SIGTERM}) {
			t.Fatalf("signals at deletion: got %v, want [SIGTERM]", got)
		}
		time.Sleep(19 * time.Second)
		synctest.Wait()
		if got := app.signals(); slices.Contains(got, syscall.SIGKILL) {
			t.Fatalf("signals within the 20s grace: got %v, want no SIGKILL", got)
		}
		time.Sleep(time.Second)
		synctest.Wait()
		if got := app.signals(); !slices.Contains(got, syscall.SIGKILL) {
			t.Fatalf("signals after the grace: got %v, want SIGKILL", got)
		}
		if got := b.net.detachedIDs(); !slices.Equal(got, []string{string(pod.UID)}) {
			t.Errorf("addresses freed: got %v, want [%s]", got, pod.UID)
		}
		if _, err := b.client.CoreV1().Pods(pod.Namespace).Get(b.ctx, pod.Name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			t.Errorf("pod in the API after it stopped: got err %v, want NotFound", err)
		}
		if got := len(b.rtm.containers()); got != 1 {
			t.Errorf("container runs: got %d, want 1 (not restarted while stopping)", got)
		}
	})
}

// A pod removed from the API at once (a forced delete, grace 0) while its
// container runs is stopped and cleaned up with no pod object left to
// read: the agent crashed on it once, reading the pod's UID from the pod.
func TestPodLoopStopsPodGoneFromAPI(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := newLoopBed(t, &fakeRuntime{})
		pod := sleeper("web", corev1.RestartPolicyAlways)
		b.apply(pod)
		app := b.rtm.containers()[0]

		if err := b.client.CoreV1().Pods(pod.Namespace).Delete(b.ctx, pod.Name, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		if err := b.a.podFactory.Core().V1().Pods().Informer().GetIndexer().Delete(pod); err != nil {
			t.Fatal(err)
		}
		b.a.podEvent(b.ctx, pod)
		synctest.Wait()
		if got := app.signals(); !slices.Contains(got, syscall.SIGTERM) {
			t.Errorf("signals after the pod left the API: got %v, want SIGTERM", got)
		}
		if got := b.net.detachedIDs(); !slices.Equal(got, []string{string(pod.UID)}) {
			t.Errorf("addresses freed: got %v, want [%s]", got, pod.UID)
		}
	})
}

// A finished pod's sidecar is stopped and its end written to the API,
// also when that write fails at first: the agent writes it again. Pins
// the status that kept a stopped sidecar running for good after one
// failed write.
func TestPodLoopWritesStoppedSidecarAfterFailedWrite(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := newLoopBed(t, &fakeRuntime{})
		var mu sync.Mutex
		failures := 0
		b.client.PrependReactor("update", "pods", func(action k8stesting.Action) (bool, runtime.Object, error) {
			u, ok := action.(k8stesting.UpdateAction)
			if !ok || u.GetSubresource() != "status" {
				return false, nil, nil
			}
			s := u.GetObject().(*corev1.Pod).Status.InitContainerStatuses
			mu.Lock()
			defer mu.Unlock()
			if len(s) == 1 && s[0].State.Terminated != nil && failures == 0 {
				failures++
				return true, nil, errors.New("etcdserver: request timed out")
			}
			return false, nil, nil
		})
		pod := sleeper("job", corev1.RestartPolicyNever)
		pod.Spec.InitContainers = []corev1.Container{{Name: "proxy", Command: []string{"sleep", "3600"},
			RestartPolicy: ptr.To(corev1.ContainerRestartPolicyAlways)}}
		b.apply(pod)
		time.Sleep(time.Second)
		synctest.Wait()
		procs := b.rtm.containers()
		if len(procs) != 2 {
			t.Fatalf("container runs: got %d, want 2 (proxy, app)", len(procs))
		}
		procs[1].exit(0)
		time.Sleep(5 * time.Second)
		synctest.Wait()
		st := b.status(pod)
		if mu.Lock(); failures != 1 {
			t.Errorf("failed writes: got %d, want 1", failures)
		}
		mu.Unlock()
		if s := st.InitContainerStatuses; st.Phase != corev1.PodSucceeded || len(s) != 1 || s[0].State.Terminated == nil {
			t.Errorf("got phase %s, sidecar %+v; want Succeeded with the sidecar terminated", st.Phase, s)
		}
	})
}
