package nodelifecycle

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
)

func mkNode(name string) *corev1.Node {
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{{
			Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady",
			LastHeartbeatTime: metav1.Now(),
		}}},
	}
}

func mkLease(node string) *coordinationv1.Lease {
	now := metav1.NewMicroTime(time.Now())
	return &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Name: node, Namespace: LeaseNamespace},
		Spec:       coordinationv1.LeaseSpec{HolderIdentity: &node, RenewTime: &now},
	}
}

func mkPod(name, node string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns"},
		Spec:       corev1.PodSpec{NodeName: node},
		Status: corev1.PodStatus{Phase: corev1.PodRunning, Conditions: []corev1.PodCondition{
			{Type: corev1.PodScheduled, Status: corev1.ConditionTrue},
			{Type: corev1.PodReady, Status: corev1.ConditionTrue},
		}},
	}
}

// renew renews node's Lease every 10s until ctx ends, as a live agent does.
func renew(ctx context.Context, client *fake.Clientset, node string) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-time.After(10 * time.Second):
		}
		l, err := client.CoordinationV1().Leases(LeaseNamespace).Get(ctx, node, metav1.GetOptions{})
		if err != nil {
			return
		}
		now := metav1.NewMicroTime(time.Now())
		l.Spec.RenewTime = &now
		if _, err := client.CoordinationV1().Leases(LeaseNamespace).Update(ctx, l, metav1.UpdateOptions{}); err != nil {
			return
		}
	}
}

func TestController(t *testing.T) {
	cases := []struct {
		name   string
		nodes  []string // every node gets a Ready node and pod <node>-pod
		leases []string // nodes that have a Lease at the start
		renew  []string // nodes whose agent keeps renewing
		wait   time.Duration
		// wantNodes and wantPods are the Ready statuses after wait.
		wantNodes  map[string]corev1.ConditionStatus
		wantPods   map[string]corev1.ConditionStatus
		wantMarked float64
	}{
		{
			name:       "stale lease marks node unknown and its pods not ready, other nodes untouched",
			nodes:      []string{"a", "b"},
			leases:     []string{"a", "b"},
			renew:      []string{"b"},
			wait:       time.Minute,
			wantNodes:  map[string]corev1.ConditionStatus{"a": corev1.ConditionUnknown, "b": corev1.ConditionTrue},
			wantPods:   map[string]corev1.ConditionStatus{"a-pod": corev1.ConditionFalse, "b-pod": corev1.ConditionTrue},
			wantMarked: 1,
		},
		{
			name:      "fresh leases change nothing",
			nodes:     []string{"a", "b"},
			leases:    []string{"a", "b"},
			renew:     []string{"a", "b"},
			wait:      5 * time.Minute,
			wantNodes: map[string]corev1.ConditionStatus{"a": corev1.ConditionTrue, "b": corev1.ConditionTrue},
			wantPods:  map[string]corev1.ConditionStatus{"a-pod": corev1.ConditionTrue, "b-pod": corev1.ConditionTrue},
		},
		{
			name:      "missing lease within the grace period changes nothing",
			nodes:     []string{"a"},
			wait:      30 * time.Second,
			wantNodes: map[string]corev1.ConditionStatus{"a": corev1.ConditionTrue},
			wantPods:  map[string]corev1.ConditionStatus{"a-pod": corev1.ConditionTrue},
		},
		{
			name:       "missing lease after the grace period marks node unknown",
			nodes:      []string{"a", "b"},
			leases:     []string{"b"},
			renew:      []string{"b"},
			wait:       time.Minute,
			wantNodes:  map[string]corev1.ConditionStatus{"a": corev1.ConditionUnknown, "b": corev1.ConditionTrue},
			wantPods:   map[string]corev1.ConditionStatus{"a-pod": corev1.ConditionFalse, "b-pod": corev1.ConditionTrue},
			wantMarked: 1,
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				var objs []runtime.Object
				for _, n := range tc.nodes {
					objs = append(objs, mkNode(n), mkPod(n+"-pod", n))
				}
				for _, n := range tc.leases {
					objs = append(objs, mkLease(n))
				}
				client := fake.NewClientset(objs...)
				factory := informers.NewSharedInformerFactory(client, 0)
				reg := prometheus.NewRegistry()
				c := New(client, factory, Options{Registerer: reg})
				ctx, cancel := context.WithCancel(t.Context())
				done := make(chan struct{})
				go func() { c.Run(ctx, 2); close(done) }()
				for _, n := range tc.renew {
					go renew(ctx, client, n)
				}
				t.Cleanup(func() { cancel(); <-done; factory.Shutdown() })

				time.Sleep(tc.wait)
				synctest.Wait()

				for name, want := range tc.wantNodes {
					n, err := client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
					if err != nil {
						t.Fatal(err)
					}
					if got := nodeReady(n); got != want {
						t.Errorf("node %s Ready: got %s, want %s", name, got, want)
					}
					if want == corev1.ConditionUnknown {
						cond := n.Status.Conditions[0]
						if cond.Reason != reasonNodeStatusUnknown || cond.Message != messageNodeStatusUnknown {
							t.Errorf("node %s Ready reason/message: got %q/%q, want %q/%q", name, cond.Reason, cond.Message, reasonNodeStatusUnknown, messageNodeStatusUnknown)
						}
					}
				}
				for name, want := range tc.wantPods {
					p, err := client.CoreV1().Pods("ns").Get(ctx, name, metav1.GetOptions{})
					if err != nil {
						t.Fatal(err)
					}
					if got := p.Status.Conditions[1].Status; got != want {
						t.Errorf("pod %s Ready: got %s, want %s", name, got, want)
					}
				}
				if got := testutil.ToFloat64(c.metrics.podsMarked); got != tc.wantMarked {
					t.Errorf("pods marked not ready: got %v, want %v", got, tc.wantMarked)
				}
				wantUnknown := 0
				for _, s := range tc.wantNodes {
					if s == corev1.ConditionUnknown {
						wantUnknown++
					}
				}
				if got := testutil.ToFloat64(c.metrics.nodes.WithLabelValues("Unknown")); got != float64(wantUnknown) {
					t.Errorf("nodes gauge Unknown: got %v, want %d", got, wantUnknown)
				}
			})
		})
	}
}

func TestMarkNodeUnknownIdempotent(t *testing.T) {
	n := mkNode("a")
	out := markNodeUnknown(n, time.Now())
	if out == nil {
		t.Fatal("first mark: got no change, want Ready Unknown")
	}
	if out.Status.Conditions[0].LastHeartbeatTime != n.Status.Conditions[0].LastHeartbeatTime {
		t.Errorf("heartbeat: got %v, want the agent's %v kept", out.Status.Conditions[0].LastHeartbeatTime, n.Status.Conditions[0].LastHeartbeatTime)
	}
	if again := markNodeUnknown(out, time.Now()); again != nil {
		t.Errorf("second mark: got a change, want none")
	}
	if n.Status.Conditions[0].Status != corev1.ConditionTrue {
		t.Errorf("input node: got Ready %s, want it unmodified (True)", n.Status.Conditions[0].Status)
	}
}
