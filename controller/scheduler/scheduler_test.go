package scheduler

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/record"
)

type nodeOpt func(*corev1.Node)

func mkNode(name string, opts ...nodeOpt) *corev1.Node {
	n := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"kubernetes.io/hostname": name}},
		Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{{
			Type: corev1.NodeReady, Status: corev1.ConditionTrue,
		}}},
	}
	for _, o := range opts {
		o(n)
	}
	return n
}

func cordoned(n *corev1.Node) { n.Spec.Unschedulable = true }
func notReady(n *corev1.Node) { n.Status.Conditions[0].Status = corev1.ConditionFalse }
func label(k, v string) nodeOpt {
	return func(n *corev1.Node) { n.Labels[k] = v }
}

type podOpt func(*corev1.Pod)

func mkPod(name string, opts ...podOpt) *corev1.Pod {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", UID: types.UID("uid-" + name)}}
	for _, o := range opts {
		o(p)
	}
	return p
}

func on(node string) podOpt           { return func(p *corev1.Pod) { p.Spec.NodeName = node } }
func phase(ph corev1.PodPhase) podOpt { return func(p *corev1.Pod) { p.Status.Phase = ph } }
func schedulerName(n string) podOpt   { return func(p *corev1.Pod) { p.Spec.SchedulerName = n } }
func selecting(k, v string) podOpt {
	return func(p *corev1.Pod) { p.Spec.NodeSelector = map[string]string{k: v} }
}

// applyBindings makes the fake do what the API server does for a
// pods/binding create: set spec.nodeName and PodScheduled True.
func applyBindings(client *fake.Clientset) {
	client.PrependReactor("create", "pods", func(a clienttesting.Action) (bool, runtime.Object, error) {
		if a.GetSubresource() != "binding" {
			return false, nil, nil
		}
		b := a.(clienttesting.CreateAction).GetObject().(*corev1.Binding)
		gvr := corev1.SchemeGroupVersion.WithResource("pods")
		obj, err := client.Tracker().Get(gvr, b.Namespace, b.Name)
		if err != nil {
			return true, nil, err
		}
		pod := obj.(*corev1.Pod).DeepCopy()
		pod.Spec.NodeName = b.Target.Name
		pod.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionTrue}}
		return true, nil, client.Tracker().Update(gvr, pod, b.Namespace)
	})
}

type env struct {
	ctx      context.Context
	client   *fake.Clientset
	recorder *record.FakeRecorder
}

// start runs a scheduler over objs inside a synctest bubble and lets it
// settle; it stops when the test ends.
func start(t *testing.T, objs ...runtime.Object) *env {
	client := fake.NewClientset(objs...)
	applyBindings(client)
	factory := informers.NewSharedInformerFactory(client, 0)
	recorder := record.NewFakeRecorder(100)
	s := New(client, factory, recorder, Options{Registerer: prometheus.NewRegistry()})
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() { s.Run(ctx, 2); close(done) }()
	t.Cleanup(func() { cancel(); <-done; factory.Shutdown() })
	time.Sleep(time.Second)
	synctest.Wait()
	return &env{ctx: ctx, client: client, recorder: recorder}
}

func (e *env) pod(t *testing.T, name string) *corev1.Pod {
	t.Helper()
	p, err := e.client.CoreV1().Pods("ns").Get(e.ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return p
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

func (e *env) binds() int {
	n := 0
	for _, a := range e.client.Actions() {
		if a.GetVerb() == "create" && a.GetSubresource() == "binding" {
			n++
		}
	}
	return n
}

func TestScheduler(t *testing.T) {
	cases := []struct {
		name      string
		objs      []runtime.Object
		wantNodes map[string]string // pod -> spec.nodeName after settling
		wantBinds int
	}{
		{
			name: "binds to the least-loaded ready node, assuming its own binds",
			objs: []runtime.Object{
				mkNode("a"), mkNode("b"), mkNode("c"),
				mkPod("x1", on("a")), mkPod("x2", on("a")), mkPod("x3", on("b")), mkPod("x4", on("c")),
				mkPod("p1"), mkPod("p2"),
			},
			wantNodes: map[string]string{"p1": "b|c", "p2": "b|c"},
			wantBinds: 2,
		},
		{
			name: "ties are broken by name",
			objs: []runtime.Object{
				mkNode("b"), mkNode("a"), mkPod("p1"),
			},
			wantNodes: map[string]string{"p1": "a"},
			wantBinds: 1,
		},
		{
			name: "respects nodeSelector",
			objs: []runtime.Object{
				mkNode("a", label("disk", "hdd")), mkNode("b", label("disk", "ssd")),
				mkPod("x1", on("b")), mkPod("p1", selecting("disk", "ssd")),
			},
			wantNodes: map[string]string{"p1": "b"},
			wantBinds: 1,
		},
		{
			name: "skips unschedulable and not ready nodes",
			objs: []runtime.Object{
				mkNode("a", cordoned), mkNode("b", notReady), mkNode("c"),
				mkPod("x1", on("c")), mkPod("x2", on("c")), mkPod("p1"),
			},
			wantNodes: map[string]string{"p1": "c"},
			wantBinds: 1,
		},
		{
			name: "finished pods do not count towards a node's load",
			objs: []runtime.Object{
				mkNode("a"), mkNode("b"),
				mkPod("x1", on("a"), phase(corev1.PodSucceeded)), mkPod("x2", on("a"), phase(corev1.PodFailed)),
				mkPod("x3", on("b")), mkPod("p1"),
			},
			wantNodes: map[string]string{"p1": "a"},
			wantBinds: 1,
		},
		{
			name:      "already bound pods are ignored",
			objs:      []runtime.Object{mkNode("a"), mkNode("b"), mkPod("x1", on("b"))},
			wantNodes: map[string]string{"x1": "b"},
			wantBinds: 0,
		},
		{
			name: "pods for another scheduler are ignored; default-scheduler by name is ours",
			objs: []runtime.Object{
				mkNode("a"), mkPod("other", schedulerName("other-scheduler")), mkPod("named", schedulerName(corev1.DefaultSchedulerName)),
			},
			wantNodes: map[string]string{"other": "", "named": "a"},
			wantBinds: 1,
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				e := start(t, tc.objs...)
				got := map[string]string{}
				for name, want := range tc.wantNodes {
					got[name] = e.pod(t, name).Spec.NodeName
					if !slices.Contains(strings.Split(want, "|"), got[name]) {
						t.Errorf("pod %s node: got %q, want %q", name, got[name], want)
					}
				}
				if got["p1"] != "" && got["p1"] == got["p2"] {
					t.Errorf("p1 and p2: got both on %s, want one each on b and c", got["p1"])
				}
				if n := e.binds(); n != tc.wantBinds {
					t.Errorf("binds: got %d, want %d", n, tc.wantBinds)
				}
			})
		})
	}
}

func TestUnschedulable(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := start(t,
			mkNode("a", cordoned), mkNode("b", notReady), mkNode("c", label("disk", "hdd")),
			mkPod("p1", selecting("disk", "ssd")))

		const wantMsg = "0/3 nodes are available: 1 node(s) didn't match Pod's node affinity/selector, 1 node(s) were not ready, 1 node(s) were unschedulable."
		evs := e.events()
		if len(evs) == 0 || evs[0] != "Warning FailedScheduling "+wantMsg {
			t.Errorf("events: got %q, want first %q", evs, "Warning FailedScheduling "+wantMsg)
		}
		p := e.pod(t, "p1")
		if p.Spec.NodeName != "" {
			t.Errorf("node: got %q, want unbound", p.Spec.NodeName)
		}
		var cond corev1.PodCondition
		for _, c := range p.Status.Conditions {
			if c.Type == corev1.PodScheduled {
				cond = c
			}
		}
		if cond.Status != corev1.ConditionFalse || cond.Reason != corev1.PodReasonUnschedulable || cond.Message != wantMsg {
			t.Errorf("PodScheduled: got %s/%s/%q, want False/Unschedulable/%q", cond.Status, cond.Reason, cond.Message, wantMsg)
		}

		// Retries back off: another 30s must not rewrite the same status.
		updates := func() int {
			n := 0
			for _, a := range e.client.Actions() {
				if a.GetVerb() == "update" && a.GetSubresource() == "status" {
					n++
				}
			}
			return n
		}
		before := updates()
		time.Sleep(30 * time.Second)
		synctest.Wait()
		if n := updates() - before; n != 0 {
			t.Errorf("status writes on retry: got %d, want 0", n)
		}

		// A node that fits arrives: the pod is placed without waiting.
		if _, err := e.client.CoreV1().Nodes().Create(e.ctx, mkNode("d", label("disk", "ssd")), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		if got := e.pod(t, "p1").Spec.NodeName; got != "d" {
			t.Errorf("node after a fitting node appeared: got %q, want %q", got, "d")
		}
	})
}

func TestPickNoNodes(t *testing.T) {
	node, msg := pick(mkPod("p"), nil, nil)
	if node != "" || msg != errNoNodes {
		t.Errorf("pick with no nodes: got %q/%q, want \"\"/%q", node, msg, errNoNodes)
	}
}

// TestBindFailureRetried: binds run beside the scheduling worker, so a
// slow bind does not hold up the next Pod, and a bind that then fails must
// drop its assumption and queue the Pod again itself, since no worker is
// waiting on it to retry. With the bind in the worker, the second Pod
// waits; without the retry, the first is never bound.
func TestBindFailureRetried(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fc := fake.NewClientset(mkNode("a"), mkNode("b"), mkPod("p1"), mkPod("p2"))
		applyBindings(fc)
		client := &heldBind{Interface: fc, release: make(chan struct{})}
		release := sync.OnceFunc(func() { close(client.release) })
		factory := informers.NewSharedInformerFactory(fc, 0)
		s := New(client, factory, record.NewFakeRecorder(100), Options{Registerer: prometheus.NewRegistry()})
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan struct{})
		go func() { s.Run(ctx, 1); close(done) }()
		defer func() { release(); cancel(); <-done; factory.Shutdown() }()
		nodeOf := func(name string) string {
			p, err := fc.CoreV1().Pods("ns").Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			return p.Spec.NodeName
		}

		time.Sleep(time.Second)
		synctest.Wait()
		held, other := client.heldPod(), "p1"
		if held == "p1" {
			other = "p2"
		}
		if held == "" || nodeOf(other) == "" {
			t.Fatalf("while the first bind (of %q) hangs: %s bound to %q, want it placed meanwhile", held, other, nodeOf(other))
		}
		release()
		time.Sleep(2 * initialBackoff)
		synctest.Wait()
		if got := nodeOf(held); got == "" || got == nodeOf(other) {
			t.Errorf("after its bind failed: %s bound to %q, want the node %s is not on", held, got, other)
		}
	})
}

// heldBind is a client whose first pods/binding call waits for release
// and then fails, as a bind timing out on a busy API server does. It wraps
// the clientset rather than adding a reactor, since the fake runs its
// reactors under one lock.
type heldBind struct {
	kubernetes.Interface
	release chan struct{}

	mu   sync.Mutex
	held string // the Pod whose bind was held
}

func (c *heldBind) heldPod() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.held
}

func (c *heldBind) CoreV1() corev1client.CoreV1Interface {
	return heldCore{CoreV1Interface: c.Interface.CoreV1(), c: c}
}

type heldCore struct {
	corev1client.CoreV1Interface
	c *heldBind
}

func (h heldCore) Pods(ns string) corev1client.PodInterface {
	return heldPods{PodInterface: h.CoreV1Interface.Pods(ns), c: h.c}
}

type heldPods struct {
	corev1client.PodInterface
	c *heldBind
}

func (p heldPods) Bind(ctx context.Context, b *corev1.Binding, opts metav1.CreateOptions) error {
	p.c.mu.Lock()
	first := p.c.held == ""
	if first {
		p.c.held = b.Name
	}
	p.c.mu.Unlock()
	if first {
		<-p.c.release
		return apierrors.NewInternalError(errors.New("etcd timed out"))
	}
	return p.PodInterface.Bind(ctx, b, opts)
}
