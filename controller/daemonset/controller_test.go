package daemonset

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/record"
)

type env struct {
	ctx      context.Context
	client   *fake.Clientset
	recorder *record.FakeRecorder
}

// nameGenerator makes the fake do what the API server does on create:
// a name from generateName, a UID and a creation time.
func nameGenerator(client *fake.Clientset) {
	var n atomic.Int32
	client.PrependReactor("create", "*", func(a clienttesting.Action) (bool, runtime.Object, error) {
		obj, ok := a.(clienttesting.CreateAction).GetObject().(metav1.Object)
		if !ok || a.GetSubresource() != "" {
			return false, nil, nil
		}
		i := n.Add(1)
		if obj.GetName() == "" && obj.GetGenerateName() != "" {
			obj.SetName(fmt.Sprintf("%s%05d", obj.GetGenerateName(), i))
		}
		obj.SetUID(types.UID(fmt.Sprintf("uid-%d", i)))
		obj.SetCreationTimestamp(metav1.Now())
		return false, nil, nil
	})
}

// start runs the controller over objs inside a synctest bubble and lets it
// settle; it stops when the test ends.
func start(t *testing.T, objs ...runtime.Object) *env {
	client := fake.NewClientset(objs...)
	nameGenerator(client)
	factory := informers.NewSharedInformerFactory(client, 0)
	recorder := record.NewFakeRecorder(1000)
	c := New(client, factory, recorder, Options{})
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() { c.Run(ctx, 2); close(done) }()
	t.Cleanup(func() { cancel(); <-done; factory.Shutdown() })
	e := &env{ctx: ctx, client: client, recorder: recorder}
	e.settle()
	return e
}

func (e *env) settle() {
	time.Sleep(time.Second)
	synctest.Wait()
}

// podNodes returns the names of the Nodes the Pods are for, sorted.
func (e *env) podNodes(t *testing.T) []string {
	t.Helper()
	var out []string
	for _, p := range e.pods(t) {
		out = append(out, targetNode(p))
	}
	slices.Sort(out)
	return out
}

func (e *env) pods(t *testing.T) []*corev1.Pod {
	t.Helper()
	list, err := e.client.CoreV1().Pods("ns").List(e.ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var out []*corev1.Pod
	for i := range list.Items {
		out = append(out, &list.Items[i])
	}
	return out
}

func (e *env) ds(t *testing.T) *appsv1.DaemonSet {
	t.Helper()
	ds, err := e.client.AppsV1().DaemonSets("ns").Get(e.ctx, "ds", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return ds
}

func (e *env) events() []string {
	var out []string
	for {
		select {
		case ev := <-e.recorder.Events:
			out = append(out, ev)
		default:
			return out
		}
	}
}

func countPrefix(evs []string, prefix string) int {
	n := 0
	for _, ev := range evs {
		if strings.HasPrefix(ev, prefix) {
			n++
		}
	}
	return n
}

func TestOnePodPerEligibleNode(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := start(t, mkDS(), mkNode("a"), mkNode("b"), mkNode("tainted", taint("x", corev1.TaintEffectNoSchedule)))

		if got, want := e.podNodes(t), []string{"a", "b"}; !slices.Equal(got, want) {
			t.Fatalf("pods on nodes: got %v, want %v", got, want)
		}
		pod := e.pods(t)[0]
		revs, _ := e.client.AppsV1().ControllerRevisions("ns").List(e.ctx, metav1.ListOptions{})
		if len(revs.Items) != 1 || revs.Items[0].Revision != 1 {
			t.Fatalf("revisions: got %d, want one with revision 1", len(revs.Items))
		}
		hash := revs.Items[0].Labels[appsv1.DefaultDaemonSetUniqueLabelKey]
		if got := pod.Labels[appsv1.DefaultDaemonSetUniqueLabelKey]; got == "" || got != hash || revs.Items[0].Name != "ds-"+hash {
			t.Errorf("pod hash label: got %q, want the revision's %q (revision %s)", got, hash, revs.Items[0].Name)
		}
		if ref := metav1.GetControllerOf(pod); ref == nil || ref.UID != "ds-uid" || ref.Kind != "DaemonSet" {
			t.Errorf("controller: got %v, want DaemonSet ds-uid", ref)
		}
		if len(pod.Spec.Tolerations) != 6 {
			t.Errorf("tolerations: got %d, want upstream's 6", len(pod.Spec.Tolerations))
		}
		st := e.ds(t).Status
		if st.DesiredNumberScheduled != 2 || st.CurrentNumberScheduled != 2 || st.UpdatedNumberScheduled != 2 ||
			st.NumberUnavailable != 2 || st.ObservedGeneration != 1 {
			t.Errorf("status: got %+v, want 2 desired, current and updated, 2 unavailable, generation 1", st)
		}
		if n := countPrefix(e.events(), "Normal SuccessfulCreate Created pod: ds-"); n != 2 {
			t.Errorf("SuccessfulCreate events: got %d, want 2", n)
		}

		// A node joining gets its pod.
		if _, err := e.client.CoreV1().Nodes().Create(e.ctx, mkNode("c"), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		e.settle()
		if got, want := e.podNodes(t), []string{"a", "b", "c"}; !slices.Equal(got, want) {
			t.Errorf("after node c joined: got %v, want %v", got, want)
		}

		// A NoExecute taint the pod does not tolerate removes it.
		b := mkNode("b", taint("evict", corev1.TaintEffectNoExecute))
		if _, err := e.client.CoreV1().Nodes().Update(e.ctx, b, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		e.settle()
		if got, want := e.podNodes(t), []string{"a", "c"}; !slices.Equal(got, want) {
			t.Errorf("after node b was tainted NoExecute: got %v, want %v", got, want)
		}
		// A node leaving takes its (unbound) pod with it.
		if err := e.client.CoreV1().Nodes().Delete(e.ctx, "c", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		e.settle()
		if got, want := e.podNodes(t), []string{"a"}; !slices.Equal(got, want) {
			t.Errorf("after node c left: got %v, want %v", got, want)
		}
	})
}

func TestFailedPodReplacedWithBackoff(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := start(t, mkDS(), mkNode("a"))
		fail := func() string {
			p := e.pods(t)[0]
			p.Status.Phase = corev1.PodFailed
			if _, err := e.client.CoreV1().Pods("ns").UpdateStatus(e.ctx, p, metav1.UpdateOptions{}); err != nil {
				t.Fatal(err)
			}
			return p.Name
		}

		first := fail()
		synctest.Wait()
		pods := e.pods(t)
		if len(pods) != 1 || pods[0].Name == first {
			t.Fatalf("after the first failure: got %v, want one new pod", names(pods))
		}
		if n := countPrefix(e.events(), "Warning FailedDaemonPod Found failed daemon pod ns/"+first+" on node a"); n != 1 {
			t.Errorf("FailedDaemonPod events: got %d, want 1", n)
		}

		// Failing again at once: the pod stays until the back-off begun by
		// the first failure (1 s) has passed, then is replaced.
		second := fail()
		synctest.Wait()
		if pods := e.pods(t); len(pods) != 1 || pods[0].Name != second {
			t.Fatalf("within the back-off: got %v, want the failed %s kept", names(pods), second)
		}
		time.Sleep(3 * time.Second)
		synctest.Wait()
		if pods := e.pods(t); len(pods) != 1 || pods[0].Name == second || pods[0].Status.Phase == corev1.PodFailed {
			t.Errorf("after the back-off: got %v, want one new pod", names(pods))
		}
	})
}

// setReady marks every live Pod bound and Ready, as agents would.
func (e *env) setReady(t *testing.T) {
	for _, p := range e.pods(t) {
		if podReady(p) {
			continue
		}
		p.Spec.NodeName = targetNode(p)
		if _, err := e.client.CoreV1().Pods("ns").Update(e.ctx, p, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		p, _ = e.client.CoreV1().Pods("ns").Get(e.ctx, p.Name, metav1.GetOptions{})
		p.Status.Phase = corev1.PodRunning
		p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: metav1.Now()}}
		if _, err := e.client.CoreV1().Pods("ns").UpdateStatus(e.ctx, p, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	e.settle()
}

func podReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

func TestRollingUpdateAndHistory(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		limit := int32(0)
		e := start(t, mkDS(func(ds *appsv1.DaemonSet) { ds.Spec.RevisionHistoryLimit = &limit }),
			mkNode("a"), mkNode("b"), mkNode("c"))
		e.setReady(t)
		oldHash := e.pods(t)[0].Labels[appsv1.DefaultDaemonSetUniqueLabelKey]

		ds := e.ds(t)
		ds.Spec.Template.Spec.Containers[0].Command = []string{"sleep", "1000"}
		ds.Generation = 2
		if _, err := e.client.AppsV1().DaemonSets("ns").Update(e.ctx, ds, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		e.settle()
		// maxUnavailable 1: one old pod at a time is replaced, and the
		// others wait for its successor to be ready.
		for round := 1; round <= 3; round++ {
			updated, old := 0, 0
			for _, p := range e.pods(t) {
				if p.Labels[appsv1.DefaultDaemonSetUniqueLabelKey] == oldHash {
					old++
				} else {
					updated++
				}
			}
			if updated != round || old != 3-round {
				t.Fatalf("round %d: got %d updated and %d old pods, want %d and %d", round, updated, old, round, 3-round)
			}
			e.setReady(t)
		}
		st := e.ds(t).Status
		if st.UpdatedNumberScheduled != 3 || st.NumberAvailable != 3 || st.ObservedGeneration != 2 {
			t.Errorf("status: got %+v, want 3 updated and available, generation 2", st)
		}
		revs, _ := e.client.AppsV1().ControllerRevisions("ns").List(e.ctx, metav1.ListOptions{})
		if len(revs.Items) != 1 || revs.Items[0].Revision != 2 {
			t.Errorf("revisions with revisionHistoryLimit 0: got %d, want only revision 2", len(revs.Items))
		}
	})
}

func TestOnDeleteKeepsOldPods(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := start(t, mkDS(func(ds *appsv1.DaemonSet) {
			ds.Spec.UpdateStrategy = appsv1.DaemonSetUpdateStrategy{Type: appsv1.OnDeleteDaemonSetStrategyType}
		}), mkNode("a"), mkNode("b"))
		e.setReady(t)
		before := names(e.pods(t))
		ds := e.ds(t)
		ds.Spec.Template.Labels["v"] = "2"
		if _, err := e.client.AppsV1().DaemonSets("ns").Update(e.ctx, ds, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		e.settle()
		if got := names(e.pods(t)); !slices.Equal(got, before) {
			t.Errorf("pods after a template change with OnDelete: got %v, want %v", got, before)
		}
		if st := e.ds(t).Status; st.UpdatedNumberScheduled != 0 {
			t.Errorf("updatedNumberScheduled: got %d, want 0", st.UpdatedNumberScheduled)
		}
		// Deleting a pod by hand brings it back at the new template.
		if err := e.client.CoreV1().Pods("ns").Delete(e.ctx, before[0], metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		e.settle()
		if st := e.ds(t).Status; st.UpdatedNumberScheduled != 1 || st.CurrentNumberScheduled != 2 {
			t.Errorf("after deleting one pod: got %d updated, %d current, want 1 and 2", st.UpdatedNumberScheduled, st.CurrentNumberScheduled)
		}
	})
}

func TestRollbackRenumbersRevision(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := start(t, mkDS(func(ds *appsv1.DaemonSet) {
			ds.Spec.UpdateStrategy = appsv1.DaemonSetUpdateStrategy{Type: appsv1.OnDeleteDaemonSetStrategyType}
		}), mkNode("a"))
		setCommand := func(cmd string) {
			ds := e.ds(t)
			ds.Spec.Template.Spec.Containers[0].Command = []string{"sleep", cmd}
			if _, err := e.client.AppsV1().DaemonSets("ns").Update(e.ctx, ds, metav1.UpdateOptions{}); err != nil {
				t.Fatal(err)
			}
			e.settle()
		}
		setCommand("1")
		setCommand("inf") // back to the first template
		revs, _ := e.client.AppsV1().ControllerRevisions("ns").List(e.ctx, metav1.ListOptions{})
		got := map[int64]string{}
		for _, r := range revs.Items {
			got[r.Revision] = r.Name
		}
		podHash := e.pods(t)[0].Labels[appsv1.DefaultDaemonSetUniqueLabelKey]
		if len(got) != 2 || got[3] != "ds-"+podHash || got[2] == "" {
			t.Errorf("revisions after a rollback: got %v, want revisions 2 and 3, 3 being the first template's ds-%s", got, podHash)
		}
		if st := e.ds(t).Status; st.UpdatedNumberScheduled != 1 {
			t.Errorf("updatedNumberScheduled after the rollback: got %d, want 1 (the pod runs the first template)", st.UpdatedNumberScheduled)
		}
	})
}
