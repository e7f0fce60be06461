package podgc

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
)

func node(name string, ready bool, taints ...string) *corev1.Node {
	status := corev1.ConditionTrue
	if !ready {
		status = corev1.ConditionFalse
	}
	n := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Status:     corev1.NodeStatus{Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: status}}},
	}
	for _, t := range taints {
		n.Spec.Taints = append(n.Spec.Taints, corev1.Taint{Key: t, Effect: corev1.TaintEffectNoExecute})
	}
	return n
}

func pod(name, nodeName string, terminating bool) *corev1.Pod {
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", UID: types.UID(name + "-uid")},
		Spec:       corev1.PodSpec{NodeName: nodeName},
		Status:     corev1.PodStatus{Phase: corev1.PodRunning},
	}
	if terminating {
		now := metav1.Now()
		p.DeletionTimestamp = &now
	}
	return p
}

// TestCollector pins issue 23: nothing collected the Pods of vanished
// Nodes, so a namespace holding one stayed Terminating for good. It runs
// the collector with upstream's periods on a fake API and checks which
// Pods are left.
func TestCollector(t *testing.T) {
	objs := []runtime.Object{
		node("alive", true),
		node("down", false),
		node("out", false, corev1.TaintNodeOutOfService),
		node("out-but-ready", true, corev1.TaintNodeOutOfService),
		pod("on-alive", "alive", false),
		pod("orphan", "ghost", false),
		pod("terminating-orphan", "ghost", true),
		pod("terminating-on-down", "down", true),
		pod("running-on-out", "out", false),
		pod("terminating-on-out", "out", true),
		pod("terminating-on-ready-out", "out-but-ready", true),
		pod("unscheduled", "", false),
		pod("terminating-unscheduled", "", true),
		pod("on-late", "late", false),
		pod("on-lagging", "lagging", false),
	}
	want := map[string]bool{ // pods left at the end
		"on-alive": true, "terminating-on-down": true, "running-on-out": true,
		"terminating-on-ready-out": true, "unscheduled": true, "on-late": true, "on-lagging": true,
	}
	synctest.Test(t, func(t *testing.T) {
		client := fake.NewClientset(objs...)
		// Node "lagging" exists in the API but its event has not reached
		// the cache: the lookup after quarantine must find it.
		client.PrependReactor("get", "nodes", func(a k8stesting.Action) (bool, runtime.Object, error) {
			if a.(k8stesting.GetAction).GetName() == "lagging" {
				return true, node("lagging", true), nil
			}
			return false, nil, nil
		})
		factory := informers.NewSharedInformerFactory(client, 0)
		c := New(client, factory, Options{Registerer: prometheus.NewRegistry()})
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan struct{})
		go func() { c.Run(ctx, 2); close(done) }()
		t.Cleanup(func() { cancel(); <-done; factory.Shutdown() })

		// Node "late" registers within the quarantine.
		time.Sleep(10 * time.Second)
		if _, err := client.CoreV1().Nodes().Create(ctx, node("late", true), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		for _, name := range []string{"orphan", "terminating-orphan"} {
			if _, err := client.CoreV1().Pods("ns").Get(ctx, name, metav1.GetOptions{}); err != nil {
				t.Errorf("pod %s on a missing node went within the quarantine: %v", name, err)
			}
		}

		time.Sleep(DefaultQuarantineTime + DefaultCheckPeriod)
		synctest.Wait()
		for _, o := range objs {
			p, ok := o.(*corev1.Pod)
			if !ok {
				continue
			}
			_, err := client.CoreV1().Pods("ns").Get(ctx, p.Name, metav1.GetOptions{})
			if left := !apierrors.IsNotFound(err); left != want[p.Name] {
				t.Errorf("pod %s: left %v, want %v", p.Name, left, want[p.Name])
			}
		}
		// An orphan was marked Failed, with upstream's condition, first.
		var marked *corev1.Pod
		for _, a := range client.Actions() {
			if u, ok := a.(k8stesting.UpdateAction); ok && u.GetSubresource() == "status" {
				if p := u.GetObject().(*corev1.Pod); p.Name == "orphan" {
					marked = p
				}
			}
		}
		if marked == nil || marked.Status.Phase != corev1.PodFailed {
			t.Fatalf("orphan's status before deletion: got %v, want Failed", marked)
		}
		cond := marked.Status.Conditions[len(marked.Status.Conditions)-1]
		if cond.Type != corev1.DisruptionTarget || cond.Reason != "DeletionByPodGC" || cond.Message != "PodGC: node no longer exists" {
			t.Errorf("orphan's condition: got %s %s %q, want DisruptionTarget DeletionByPodGC", cond.Type, cond.Reason, cond.Message)
		}
		for r, n := range map[reason]float64{orphaned: 2, terminatingOutOfService: 1, terminatingUnscheduled: 1} {
			if got := testutil.ToFloat64(c.metrics.deleted.WithLabelValues("ns", string(r))); got != n {
				t.Errorf("deleted %s: got %v, want %v", r, got, n)
			}
		}
	})
}

// TestTerminatedOverThreshold: with a threshold of 2, the collector
// deletes the oldest of 4 terminated Pods and leaves running ones alone.
func TestTerminatedOverThreshold(t *testing.T) {
	objs := []runtime.Object{
		node("n", true),
		finished("old", corev1.PodSucceeded, 1, false),
		finished("older", corev1.PodFailed, 0, false),
		finished("new", corev1.PodSucceeded, 5, false),
		finished("newer", corev1.PodSucceeded, 6, false),
		finished("running", corev1.PodRunning, 0, false),
	}
	want := map[string]bool{"new": true, "newer": true, "running": true} // pods left
	synctest.Test(t, func(t *testing.T) {
		client := fake.NewClientset(objs...)
		factory := informers.NewSharedInformerFactory(client, 0)
		c := New(client, factory, Options{TerminatedPodThreshold: 2, Registerer: prometheus.NewRegistry()})
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan struct{})
		go func() { c.Run(ctx, 2); close(done) }()
		t.Cleanup(func() { cancel(); <-done; factory.Shutdown() })

		time.Sleep(DefaultCheckPeriod)
		synctest.Wait()
		for _, o := range objs {
			p, ok := o.(*corev1.Pod)
			if !ok {
				continue
			}
			_, err := client.CoreV1().Pods("ns").Get(ctx, p.Name, metav1.GetOptions{})
			if left := !apierrors.IsNotFound(err); left != want[p.Name] {
				t.Errorf("pod %s: left %v, want %v", p.Name, left, want[p.Name])
			}
		}
		if got := testutil.ToFloat64(c.metrics.deleted.WithLabelValues("ns", string(terminated))); got != 2 {
			t.Errorf("deleted terminated: got %v, want 2", got)
		}
	})
}

// A terminated Pod queued as over the threshold is not deleted when a
// newer Pod of the same name has taken its place, even a terminated one:
// the count was of the old Pod (review finding 7 of #23).
func TestTerminatedKeyIsForOnePod(t *testing.T) {
	recreated := finished("web-0", corev1.PodSucceeded, 9, false)
	recreated.UID = "new-uid"
	client := fake.NewClientset(node("n", true), recreated)
	factory := informers.NewSharedInformerFactory(client, 0)
	c := New(client, factory, Options{Registerer: prometheus.NewRegistry()})
	ctx, cancel := context.WithCancel(t.Context())
	defer factory.Shutdown()
	defer cancel()
	factory.Start(ctx.Done())
	factory.WaitForCacheSync(ctx.Done())

	k := key{pod: types.NamespacedName{Namespace: "ns", Name: "web-0"}, terminated: true, uid: "old-uid"}
	if err := c.sync(ctx, k); err != nil {
		t.Fatal(err)
	}
	if _, err := client.CoreV1().Pods("ns").Get(ctx, "web-0", metav1.GetOptions{}); err != nil {
		t.Errorf("the recreated pod: got %v, want it left", err)
	}
}
