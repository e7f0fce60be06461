package statefulset

import (
	"fmt"
	"slices"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
)

// Builders for test objects.

var now = time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)

func statefulSet(n int32, opts ...func(*appsv1.StatefulSet)) *appsv1.StatefulSet {
	s := &appsv1.StatefulSet{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "web", UID: "uid-web", Generation: 1},
		Spec: appsv1.StatefulSetSpec{
			Replicas:    ptr.To(n),
			ServiceName: "nginx",
			Selector:    &metav1.LabelSelector{MatchLabels: map[string]string{"app": "nginx"}},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "nginx"}},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "web", Command: []string{"serve", "v1"}}}},
			},
			PodManagementPolicy: appsv1.OrderedReadyPodManagement,
			UpdateStrategy: appsv1.StatefulSetUpdateStrategy{
				Type:          appsv1.RollingUpdateStatefulSetStrategyType,
				RollingUpdate: &appsv1.RollingUpdateStatefulSetStrategy{Partition: ptr.To[int32](0)},
			},
			RevisionHistoryLimit: ptr.To[int32](10),
		},
	}
	for _, o := range opts {
		o(s)
	}
	return s
}

func parallel(s *appsv1.StatefulSet) { s.Spec.PodManagementPolicy = appsv1.ParallelPodManagement }

func onDelete(s *appsv1.StatefulSet) {
	s.Spec.UpdateStrategy = appsv1.StatefulSetUpdateStrategy{Type: appsv1.OnDeleteStatefulSetStrategyType}
}

func partition(p int32) func(*appsv1.StatefulSet) {
	return func(s *appsv1.StatefulSet) { s.Spec.UpdateStrategy.RollingUpdate.Partition = ptr.To(p) }
}

func maxUnavailable(v intstr.IntOrString) func(*appsv1.StatefulSet) {
	return func(s *appsv1.StatefulSet) { s.Spec.UpdateStrategy.RollingUpdate.MaxUnavailable = &v }
}

func command(cmd ...string) func(*appsv1.StatefulSet) {
	return func(s *appsv1.StatefulSet) { s.Spec.Template.Spec.Containers[0].Command = cmd }
}

// member is pod ordinal of set from revision rev, running and ready for
// an hour unless an option says otherwise.
func member(set *appsv1.StatefulSet, ordinal int, rev string, opts ...func(*corev1.Pod)) *corev1.Pod {
	p := newPod(set, rev, ordinal)
	p.UID = types.UID("uid-" + p.Name)
	p.Status = corev1.PodStatus{Phase: corev1.PodRunning, Conditions: []corev1.PodCondition{{
		Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: metav1.NewTime(now.Add(-time.Hour)),
	}}}
	for _, o := range opts {
		o(p)
	}
	return p
}

func notReady(p *corev1.Pod) { p.Status.Conditions[0].Status = corev1.ConditionFalse }

func pending(p *corev1.Pod) {
	p.Status.Phase = corev1.PodPending
	p.Status.Conditions = nil
}

func failed(p *corev1.Pod) { p.Status.Phase = corev1.PodFailed }

func terminating(p *corev1.Pod) {
	t := metav1.NewTime(now)
	p.DeletionTimestamp = &t
}

func readySince(d time.Duration) func(*corev1.Pod) {
	return func(p *corev1.Pod) { p.Status.Conditions[0].LastTransitionTime = metav1.NewTime(now.Add(-d)) }
}

// render prints a Result's pod actions compactly: "create web-0@r2
// delete web-2".
func render(r Result) string {
	var out []string
	for _, p := range r.Delete {
		out = append(out, "delete "+p.Name)
	}
	for _, p := range r.Create {
		out = append(out, fmt.Sprintf("create %s@%s", p.Name, revisionOf(p)))
	}
	for _, p := range r.Fix {
		out = append(out, "fix "+p.Name)
	}
	slices.Sort(out)
	return strings.Join(out, ", ")
}
