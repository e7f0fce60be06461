package endpointslice

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"
)

// env is a controller running against a fake API with real informers.
type env struct {
	t      *testing.T
	ctx    context.Context
	client *fake.Clientset
	ctrl   *Controller
	reg    *prometheus.Registry
	mark   int
}

// startEnv runs a controller over objs and waits until it is idle. It
// must be called inside a synctest bubble; the controller stops when the
// test ends.
func startEnv(t *testing.T, objs ...runtime.Object) *env {
	return startEnvWith(t, Options{}, objs...)
}

// startEnvWith is startEnv with opts; the registerer, the retry back-off
// and the slice event delay are set for the test.
func startEnvWith(t *testing.T, opts Options, objs ...runtime.Object) *env {
	client := fake.NewClientset(objs...)
	serverSideNames(client)
	factory := informers.NewSharedInformerFactory(client, 0)
	reg := prometheus.NewRegistry()
	opts.Registerer, opts.syncBackoff, opts.sliceEventDelay = reg, 10*time.Millisecond, 100*time.Millisecond
	c := New(client, factory, opts)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		c.Run(ctx, 2)
		close(done)
	}()
	t.Cleanup(func() {
		cancel()
		<-done
		factory.Shutdown()
	})
	e := &env{t: t, ctx: ctx, client: client, ctrl: c, reg: reg}
	e.settle()
	return e
}

// serverSideNames makes the fake do what the API server does for slices
// and the fake does not: generateName, UID and resourceVersion.
func serverSideNames(client *fake.Clientset) {
	var n, rv atomic.Int64
	rv.Store(100)
	client.PrependReactor("create", "endpointslices", func(a clienttesting.Action) (bool, runtime.Object, error) {
		s := a.(clienttesting.CreateAction).GetObject().(*discovery.EndpointSlice)
		if s.Name == "" {
			s.Name = s.GenerateName + strconv.FormatInt(n.Add(1), 10)
		}
		s.UID = types.UID("uid-" + s.Name)
		s.ResourceVersion = strconv.FormatInt(rv.Add(1), 10)
		return false, nil, nil
	})
	client.PrependReactor("update", "endpointslices", func(a clienttesting.Action) (bool, runtime.Object, error) {
		s := a.(clienttesting.UpdateAction).GetObject().(*discovery.EndpointSlice)
		s.ResourceVersion = strconv.FormatInt(rv.Add(1), 10)
		return false, nil, nil
	})
}

// settle lets simulated time pass until the controller has handled
// everything, delayed requeues and retries included.
func (e *env) settle() {
	for range 3 {
		time.Sleep(5 * time.Second)
		synctest.Wait()
	}
}

// writes renders the slice writes since its last call.
func (e *env) writes() string {
	counts := map[string]int{}
	actions := e.client.Actions()
	for _, a := range actions[e.mark:] {
		if a.GetResource().Resource == "endpointslices" && slices.Contains([]string{"create", "update", "delete"}, a.GetVerb()) {
			counts[a.GetVerb()]++
		}
	}
	e.mark = len(actions)
	return fmt.Sprintf("create=%d update=%d delete=%d", counts["create"], counts["update"], counts["delete"])
}

func (e *env) slices() []*discovery.EndpointSlice {
	list, err := e.client.DiscoveryV1().EndpointSlices(testNS).List(e.ctx, metav1.ListOptions{})
	if err != nil {
		e.t.Fatalf("list slices: %v", err)
	}
	var out []*discovery.EndpointSlice
	for i := range list.Items {
		out = append(out, &list.Items[i])
	}
	return sortedByName(out)
}

func (e *env) must(err error) {
	e.t.Helper()
	if err != nil {
		e.t.Fatal(err)
	}
}

func objects(svc *corev1.Service, pods []*corev1.Pod) []runtime.Object {
	objs := []runtime.Object{mkNode("node-a", "zone-a", 4), mkNode("node-b", "zone-b", 4)}
	if svc != nil {
		objs = append(objs, svc)
	}
	for _, p := range pods {
		objs = append(objs, p)
	}
	return objs
}

func userSlice() *discovery.EndpointSlice {
	return &discovery.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{Name: "by-hand", Namespace: testNS, ResourceVersion: "7", Labels: map[string]string{
			discovery.LabelServiceName: "web", discovery.LabelManagedBy: "someone-else",
		}},
		AddressType: discovery.AddressTypeIPv4,
		Endpoints:   []discovery.Endpoint{{Addresses: []string{"192.0.2.1"}}},
	}
}

func TestController(t *testing.T) {
	a, b := mkPod("a", "10.0.0.1"), with(mkPod("b", "10.0.0.2"), onNode("node-b"))
	pods150 := manyPods(150)
	cases := []struct {
		name string
		objs []runtime.Object
		// wantStart are the slices after the first settle (nil: not checked).
		wantStart []string
		act       func(e *env)
		// wantWrites are the slice writes act caused.
		wantWrites string
		wantSlices []string
		check      func(t *testing.T, e *env)
	}{
		{
			name:       "service and pods produce a slice",
			objs:       objects(mkSvc(), []*corev1.Pod{a, with(b, notReady), with(mkPod("c", "10.0.0.3"), terminating)}),
			act:        func(e *env) {},
			wantWrites: "create=0 update=0 delete=0",
			wantSlices: []string{"IPv4 [http/TCP/8080/]" +
				" | 10.0.0.1 rs- node=node-a zone=zone-a | 10.0.0.2 --- node=node-b zone=zone-b | 10.0.0.3 -st node=node-a zone=zone-a"},
			check: func(t *testing.T, e *env) {
				s := e.slices()[0]
				if _, err := time.Parse(time.RFC3339Nano, s.Annotations[corev1.EndpointsLastChangeTriggerTime]); err != nil {
					t.Errorf("trigger time annotation: got %q, want an RFC3339Nano time", s.Annotations[corev1.EndpointsLastChangeTriggerTime])
				}
				if !ownedBy(s, mkSvc()) || s.Labels[discovery.LabelManagedBy] != ControllerName {
					t.Errorf("slice metadata: got owners %v labels %v, want owned by web and managed by %s", s.OwnerReferences, s.Labels, ControllerName)
				}
			},
		},
		{
			name:      "readiness flip of one pod rewrites exactly one slice",
			objs:      objects(mkSvc(), pods150),
			wantStart: nil,
			act: func(e *env) {
				_, err := e.client.CoreV1().Pods(testNS).UpdateStatus(e.ctx, with(pods150[42], notReady), metav1.UpdateOptions{})
				e.must(err)
			},
			wantWrites: "create=0 update=1 delete=0",
			check: func(t *testing.T, e *env) {
				var sizes []int
				notReadyCount := 0
				for _, s := range e.slices() {
					sizes = append(sizes, len(s.Endpoints))
					for _, ep := range s.Endpoints {
						if !deref(ep.Conditions.Ready) {
							notReadyCount++
						}
					}
				}
				slices.Sort(sizes)
				if !slices.Equal(sizes, []int{50, 100}) || notReadyCount != 1 {
					t.Errorf("slices: got sizes %v with %d not ready, want [50 100] with 1", sizes, notReadyCount)
				}
			},
		},
		{
			name: "pod deletion removes its endpoint",
			objs: objects(mkSvc(), []*corev1.Pod{a, b}),
			act: func(e *env) {
				e.must(e.client.CoreV1().Pods(testNS).Delete(e.ctx, "b", metav1.DeleteOptions{}))
			},
			wantWrites: "create=0 update=1 delete=0",
			wantSlices: []string{"IPv4 [http/TCP/8080/] | 10.0.0.1 rs- node=node-a zone=zone-a"},
		},
		{
			name:      "slices of a deleted service are removed",
			objs:      objects(mkSvc(dualStack), []*corev1.Pod{mkPod("a", "10.0.0.1", "fd00::1")}),
			wantStart: []string{"IPv4 [http/TCP/8080/] | 10.0.0.1 rs- node=node-a zone=zone-a", "IPv6 [http/TCP/8080/] | fd00::1 rs- node=node-a zone=zone-a"},
			act: func(e *env) {
				e.must(e.client.CoreV1().Services(testNS).Delete(e.ctx, "web", metav1.DeleteOptions{}))
			},
			wantWrites: "create=0 update=0 delete=2",
			wantSlices: []string{},
		},
		{
			name: "slices left by a service deleted while the controller was away are removed",
			objs: append(objects(nil, nil), func() runtime.Object {
				s := newSlice(mkSvc(), nil, discovery.AddressTypeIPv4)
				s.Name, s.UID = "web-old", "uid-web-old"
				return s
			}()),
			wantStart:  []string{},
			act:        func(e *env) {},
			wantWrites: "create=0 update=0 delete=0",
			wantSlices: []string{},
		},
		{
			name: "user-managed slice is left alone",
			objs: append(objects(mkSvc(), []*corev1.Pod{a}), userSlice()),
			act: func(e *env) {
				e.must(e.client.CoreV1().Pods(testNS).Delete(e.ctx, "a", metav1.DeleteOptions{}))
				e.settle()
				e.must(e.client.CoreV1().Services(testNS).Delete(e.ctx, "web", metav1.DeleteOptions{}))
			},
			wantWrites: "create=0 update=1 delete=1",
			wantSlices: []string{"IPv4 [] | 192.0.2.1 ---"},
			check: func(t *testing.T, e *env) {
				s := e.slices()[0]
				if s.Name != "by-hand" || s.ResourceVersion != "7" {
					t.Errorf("user slice: got %s at version %s, want by-hand untouched at 7", s.Name, s.ResourceVersion)
				}
			},
		},
		{
			name: "no write when nothing endpoints show changed",
			objs: objects(mkSvc(), []*corev1.Pod{a, b}),
			act: func(e *env) {
				svc := mkSvc(annotated("note", "x"))
				_, err := e.client.CoreV1().Services(testNS).Update(e.ctx, svc, metav1.UpdateOptions{})
				e.must(err)
				p := with(a, func(p *corev1.Pod) {
					p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "c", RestartCount: 1}}
				})
				_, err = e.client.CoreV1().Pods(testNS).UpdateStatus(e.ctx, p, metav1.UpdateOptions{})
				e.must(err)
			},
			wantWrites: "create=0 update=0 delete=0",
		},
		{
			name: "node zone change updates the endpoints on it",
			objs: objects(mkSvc(), []*corev1.Pod{a, b}),
			act: func(e *env) {
				_, err := e.client.CoreV1().Nodes().Update(e.ctx, mkNode("node-b", "zone-c", 4), metav1.UpdateOptions{})
				e.must(err)
			},
			wantWrites: "create=0 update=1 delete=0",
			wantSlices: []string{"IPv4 [http/TCP/8080/] | 10.0.0.1 rs- node=node-a zone=zone-a | 10.0.0.2 rs- node=node-b zone=zone-c"},
		},
		{
			name: "slice deleted by someone else is written again",
			objs: objects(mkSvc(), []*corev1.Pod{a}),
			act: func(e *env) {
				e.must(e.client.DiscoveryV1().EndpointSlices(testNS).Delete(e.ctx, e.slices()[0].Name, metav1.DeleteOptions{}))
				e.writes() // only the controller's writes count
			},
			wantWrites: "create=1 update=0 delete=0",
			wantSlices: []string{"IPv4 [http/TCP/8080/] | 10.0.0.1 rs- node=node-a zone=zone-a"},
		},
		{
			name: "pod appearing later joins the slice",
			objs: objects(mkSvc(), []*corev1.Pod{a}),
			act: func(e *env) {
				_, err := e.client.CoreV1().Pods(testNS).Create(e.ctx, b, metav1.CreateOptions{})
				e.must(err)
			},
			wantWrites: "create=0 update=1 delete=0",
			wantSlices: []string{"IPv4 [http/TCP/8080/] | 10.0.0.1 rs- node=node-a zone=zone-a | 10.0.0.2 rs- node=node-b zone=zone-b"},
		},
		{
			name: "PreferSameNode service gets zone and node hints",
			objs: objects(mkSvc(trafficDist(corev1.ServiceTrafficDistributionPreferSameNode)), []*corev1.Pod{a}),
			act:  func(e *env) {},
			wantSlices: []string{
				"IPv4 [http/TCP/8080/] | 10.0.0.1 rs- node=node-a zone=zone-a hint=zone-a/node-a",
			},
			wantWrites: "create=0 update=0 delete=0",
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				e := startEnv(t, tc.objs...)
				if tc.wantStart != nil {
					if got := summarizeAll(e.slices()); !slices.Equal(got, tc.wantStart) {
						t.Errorf("slices at start:\ngot  %q\nwant %q", got, tc.wantStart)
					}
				}
				e.writes()
				tc.act(e)
				e.settle()
				if got := e.writes(); got != tc.wantWrites {
					t.Errorf("writes: got %s, want %s", got, tc.wantWrites)
				}
				if tc.wantSlices != nil {
					if got := summarizeAll(e.slices()); !slices.Equal(got, tc.wantSlices) && !(len(got) == 0 && len(tc.wantSlices) == 0) {
						t.Errorf("slices:\ngot  %q\nwant %q", got, tc.wantSlices)
					}
				}
				if tc.check != nil {
					tc.check(t, e)
				}
			})
		})
	}
}

// TestControllerStaleCache pins the tracker's purpose: when the cache does
// not show the controller's last write yet, it retries instead of writing
// again.
func TestControllerStaleCache(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := startEnv(t, objects(mkSvc(), []*corev1.Pod{mkPod("a", "10.0.0.1")})...)
		s := e.slices()[0]
		ahead := s.DeepCopy()
		ahead.ResourceVersion = "999999"
		e.ctrl.tracker.wrote("ns/web", ahead) // a write the cache hasn't seen
		e.writes()
		_, err := e.client.CoreV1().Pods(testNS).Create(e.ctx, mkPod("b", "10.0.0.2"), metav1.CreateOptions{})
		e.must(err)
		e.settle()
		if got := e.writes(); got != "create=0 update=0 delete=0" {
			t.Errorf("writes while stale: got %s, want none", got)
		}
		if got := testutil.ToFloat64(e.ctrl.metrics.syncs.WithLabelValues("stale")); got == 0 {
			t.Errorf("stale syncs: got %v, want > 0", got)
		}
		// Past the grace period the cache is believed and the pod lands.
		time.Sleep(staleGrace)
		e.settle()
		if got := e.writes(); got != "create=0 update=1 delete=0" {
			t.Errorf("writes after the grace period: got %s, want one update", got)
		}
	})
}

// TestControllerBatchesPodChanges pins BatchPeriod: a Pod change after a
// quiet spell is written at once, and one that follows a sync closely
// waits until the period has passed, instead of costing a sync of its own.
func TestControllerBatchesPodChanges(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const period = time.Second
		a, b := mkPod("a", "10.0.0.1"), mkPod("b", "10.0.0.2")
		e := startEnvWith(t, Options{BatchPeriod: period}, objects(mkSvc(), []*corev1.Pod{a, b})...)
		e.writes()
		flip := func(p *corev1.Pod) {
			_, err := e.client.CoreV1().Pods(testNS).UpdateStatus(e.ctx, with(p, notReady), metav1.UpdateOptions{})
			e.must(err)
			synctest.Wait()
		}
		flip(a)
		if got := e.writes(); got != "create=0 update=1 delete=0" {
			t.Errorf("writes at once after the first change: got %s, want one update", got)
		}
		flip(b)
		if got := e.writes(); got != "create=0 update=0 delete=0" {
			t.Errorf("writes at once after a second change: got %s, want none yet", got)
		}
		time.Sleep(period)
		synctest.Wait()
		if got := e.writes(); got != "create=0 update=1 delete=0" {
			t.Errorf("writes a period after the first change: got %s, want one update", got)
		}
		want := []string{"IPv4 [http/TCP/8080/] | 10.0.0.1 --- node=node-a zone=zone-a | 10.0.0.2 --- node=node-a zone=zone-a"}
		if got := summarizeAll(e.slices()); !slices.Equal(got, want) {
			t.Errorf("slices:\ngot  %q\nwant %q", got, want)
		}
	})
}

// TestControllerSkipsPodsWithoutAddress: a Pod created and scheduled
// before it has an address is in no slice, so neither step costs a sync of
// its Service; the address does.
func TestControllerSkipsPodsWithoutAddress(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := startEnv(t, objects(mkSvc(), []*corev1.Pod{mkPod("a", "10.0.0.1")})...)
		syncs := func() float64 { return testutil.ToFloat64(e.ctrl.metrics.syncs.WithLabelValues("success")) }
		before := syncs()
		b := with(mkPod("b"), onNode(""))
		b, err := e.client.CoreV1().Pods(testNS).Create(e.ctx, b, metav1.CreateOptions{})
		e.must(err)
		e.settle()
		b.Spec.NodeName = "node-b"
		b, err = e.client.CoreV1().Pods(testNS).Update(e.ctx, b, metav1.UpdateOptions{})
		e.must(err)
		e.settle()
		if got := syncs() - before; got != 0 {
			t.Errorf("syncs after creating and scheduling a pod without an address: got %v, want 0", got)
		}
		b.Status.PodIP, b.Status.PodIPs = "10.0.0.2", []corev1.PodIP{{IP: "10.0.0.2"}}
		_, err = e.client.CoreV1().Pods(testNS).UpdateStatus(e.ctx, b, metav1.UpdateOptions{})
		e.must(err)
		e.settle()
		if got := syncs() - before; got != 1 {
			t.Errorf("syncs after the pod got its address: got %v, want 1", got)
		}
		want := []string{"IPv4 [http/TCP/8080/] | 10.0.0.1 rs- node=node-a zone=zone-a | 10.0.0.2 rs- node=node-b zone=zone-b"}
		if got := summarizeAll(e.slices()); !slices.Equal(got, want) {
			t.Errorf("slices:\ngot  %q\nwant %q", got, want)
		}
	})
}

func TestControllerMetrics(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := startEnv(t, objects(mkSvc(), manyPods(150))...)
		checks := []struct {
			name string
			got  float64
			want float64
		}{
			{"changes{operation=create}", testutil.ToFloat64(e.ctrl.metrics.changes.WithLabelValues("create")), 2},
			{"endpoints_desired", testutil.ToFloat64(e.ctrl.metrics.desired), 150},
			{"queue_depth", testutil.ToFloat64(e.ctrl.metrics.queueDepth), 0},
		}
		for _, c := range checks {
			if c.got != c.want {
				t.Errorf("%s: got %v, want %v", c.name, c.got, c.want)
			}
		}
		n, err := testutil.GatherAndCount(e.reg, "endpoint_slice_controller_sync_duration_seconds")
		if err != nil || n == 0 {
			t.Errorf("sync duration series: got %d (err %v), want some", n, err)
		}
		e.must(e.client.CoreV1().Services(testNS).Delete(e.ctx, "web", metav1.DeleteOptions{}))
		e.settle()
		if got := testutil.ToFloat64(e.ctrl.metrics.changes.WithLabelValues("delete")); got != 2 {
			t.Errorf("changes{operation=delete}: got %v, want 2", got)
		}
		if got := testutil.ToFloat64(e.ctrl.metrics.desired); got != 0 {
			t.Errorf("endpoints_desired after delete: got %v, want 0", got)
		}
	})
}
