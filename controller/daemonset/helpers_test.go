package daemonset

import (
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// t0 is the creation time test objects count from.
var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

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

func label(k, v string) nodeOpt { return func(n *corev1.Node) { n.Labels[k] = v } }

func taint(key string, effect corev1.TaintEffect) nodeOpt {
	return func(n *corev1.Node) {
		n.Spec.Taints = append(n.Spec.Taints, corev1.Taint{Key: key, Effect: effect})
	}
}

func notReady(n *corev1.Node) { n.Status.Conditions[0].Status = corev1.ConditionFalse }
func cordoned(n *corev1.Node) { n.Spec.Unschedulable = true }

type dsOpt func(*appsv1.DaemonSet)

// mkDS returns a DaemonSet "ns/ds" selecting app=d, with upstream's
// defaults: RollingUpdate with maxUnavailable 1.
func mkDS(opts ...dsOpt) *appsv1.DaemonSet {
	one := intstr.FromInt32(1)
	zero := intstr.FromInt32(0)
	ds := &appsv1.DaemonSet{
		ObjectMeta: metav1.ObjectMeta{Name: "ds", Namespace: "ns", UID: "ds-uid", Generation: 1},
		Spec: appsv1.DaemonSetSpec{
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "d"}},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "d"}},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{
					Name: "c", Image: "img", Command: []string{"sleep", "inf"},
				}}},
			},
			UpdateStrategy: appsv1.DaemonSetUpdateStrategy{
				Type:          appsv1.RollingUpdateDaemonSetStrategyType,
				RollingUpdate: &appsv1.RollingUpdateDaemonSet{MaxUnavailable: &one, MaxSurge: &zero},
			},
		},
	}
	for _, o := range opts {
		o(ds)
	}
	return ds
}

func nodeSelector(k, v string) dsOpt {
	return func(ds *appsv1.DaemonSet) { ds.Spec.Template.Spec.NodeSelector = map[string]string{k: v} }
}

func tolerate(key string) dsOpt {
	return func(ds *appsv1.DaemonSet) {
		ds.Spec.Template.Spec.Tolerations = append(ds.Spec.Template.Spec.Tolerations,
			corev1.Toleration{Key: key, Operator: corev1.TolerationOpExists})
	}
}

func surge(s, u intstr.IntOrString) dsOpt {
	return func(ds *appsv1.DaemonSet) {
		ds.Spec.UpdateStrategy.RollingUpdate = &appsv1.RollingUpdateDaemonSet{MaxSurge: &s, MaxUnavailable: &u}
	}
}

type podOpt func(*corev1.Pod)

// mkPod returns a daemon Pod of mkDS's on node at hash, created age
// seconds after t0.
func mkPod(name, node, hash string, age int, opts ...podOpt) *corev1.Pod {
	p := newPod(mkDS(), node, hash)
	p.Name, p.GenerateName = name, ""
	p.UID = types.UID("uid-" + name)
	p.CreationTimestamp = metav1.NewTime(t0.Add(time.Duration(age) * time.Second))
	p.Spec.NodeName = node
	p.Status.Phase = corev1.PodRunning
	for _, o := range opts {
		o(p)
	}
	return p
}

func ready(p *corev1.Pod) {
	p.Status.Conditions = append(p.Status.Conditions, corev1.PodCondition{
		Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: metav1.NewTime(t0),
	})
}

func failed(p *corev1.Pod)    { p.Status.Phase = corev1.PodFailed }
func unbound(p *corev1.Pod)   { p.Spec.NodeName = "" }
func deleting(p *corev1.Pod)  { now := metav1.NewTime(t0); p.DeletionTimestamp = &now }
func succeeded(p *corev1.Pod) { p.Status.Phase = corev1.PodSucceeded }

func byNodeOf(pods ...*corev1.Pod) map[string][]*corev1.Pod { return groupByNode(pods) }

func names(pods []*corev1.Pod) []string {
	out := make([]string, len(pods))
	for i, p := range pods {
		out[i] = p.Name
	}
	return out
}
