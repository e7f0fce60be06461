package workload

import (
	"sort"

	corev1 "k8s.io/api/core/v1"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"portal.dev/portal/controller/internal/podutil"
)

// ControllerRef returns a controller ownerReference to owner of kind gvk,
// with blockOwnerDeletion set so that foreground deletion of the owner
// waits for what it owns.
func ControllerRef(owner metav1.Object, gvk schema.GroupVersionKind) metav1.OwnerReference {
	t := true
	return metav1.OwnerReference{
		APIVersion:         gvk.GroupVersion().String(),
		Kind:               gvk.Kind,
		Name:               owner.GetName(),
		UID:                owner.GetUID(),
		Controller:         &t,
		BlockOwnerDeletion: &t,
	}
}

// PodFromTemplate builds the Pod a controller creates from template, in
// owner's namespace and controlled by owner (of kind gvk): labels,
// annotations, finalizers and spec come from the template. An empty name
// lets the API server name the Pod after GenerateName "<owner>-" (or
// "<owner>" when the dash would not make a valid prefix, as upstream).
func PodFromTemplate(template *corev1.PodTemplateSpec, owner metav1.Object, gvk schema.GroupVersionKind, name string) *corev1.Pod {
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name:            name,
			Namespace:       owner.GetNamespace(),
			Labels:          copyMap(template.Labels),
			Annotations:     copyMap(template.Annotations),
			Finalizers:      append([]string(nil), template.Finalizers...),
			OwnerReferences: []metav1.OwnerReference{ControllerRef(owner, gvk)},
		},
		Spec: *template.Spec.DeepCopy(),
	}
	if name == "" {
		pod.GenerateName = owner.GetName() + "-"
		if len(apivalidation.NameIsDNSSubdomain(pod.GenerateName, true)) != 0 {
			pod.GenerateName = owner.GetName()
		}
	}
	return pod
}

func copyMap(m map[string]string) map[string]string {
	if m == nil {
		return nil
	}
	c := make(map[string]string, len(m))
	for k, v := range m {
		c[k] = v
	}
	return c
}

// IsActive reports whether pod still counts toward its controller's
// replicas: not Succeeded or Failed and not being deleted.
func IsActive(pod *corev1.Pod) bool {
	return pod.Status.Phase != corev1.PodSucceeded &&
		pod.Status.Phase != corev1.PodFailed &&
		pod.DeletionTimestamp == nil
}

// FilterActive returns the active Pods of pods, in their order.
func FilterActive(pods []*corev1.Pod) []*corev1.Pod {
	var out []*corev1.Pod
	for _, p := range pods {
		if IsActive(p) {
			out = append(out, p)
		}
	}
	return out
}

// SortForDeletion orders pods so that the ones to delete first on a
// scale-down come first, as upstream's ActivePods: unassigned before
// assigned; Pending before Unknown before Running; not ready before
// ready; ready for less time before ready for longer; more restarts
// before fewer; newer before older. The sort is stable.
func SortForDeletion(pods []*corev1.Pod) {
	sort.SliceStable(pods, func(i, j int) bool { return deleteBefore(pods[i], pods[j]) })
}

func deleteBefore(a, b *corev1.Pod) bool {
	if (a.Spec.NodeName == "") != (b.Spec.NodeName == "") {
		return a.Spec.NodeName == ""
	}
	if pa, pb := phaseRank(a.Status.Phase), phaseRank(b.Status.Phase); pa != pb {
		return pa < pb
	}
	ra, rb := podutil.IsReady(a), podutil.IsReady(b)
	if ra != rb {
		return !ra
	}
	if ra && rb {
		ta, tb := readySince(a), readySince(b)
		if !ta.Equal(&tb) {
			return afterOrZero(ta, tb)
		}
	}
	if ca, cb := maxRestarts(a), maxRestarts(b); ca != cb {
		return ca > cb
	}
	ta, tb := a.CreationTimestamp, b.CreationTimestamp
	if !ta.Equal(&tb) {
		return afterOrZero(ta, tb)
	}
	return false
}

// phaseRank orders phases for deletion: Pending, then Unknown, then
// Running; anything else (terminal Pods) first of all.
func phaseRank(p corev1.PodPhase) int {
	switch p {
	case corev1.PodPending:
		return 0
	case corev1.PodUnknown:
		return 1
	case corev1.PodRunning:
		return 2
	}
	return -1
}

func readySince(pod *corev1.Pod) metav1.Time {
	if c := podutil.ReadyCondition(pod); c != nil {
		return c.LastTransitionTime
	}
	return metav1.Time{}
}

// afterOrZero reports whether a sorts before b on "newest first", with an
// unknown (zero) time newest of all.
func afterOrZero(a, b metav1.Time) bool {
	if a.IsZero() || b.IsZero() {
		return a.IsZero()
	}
	return a.After(b.Time)
}

func maxRestarts(pod *corev1.Pod) int32 {
	var n int32
	for _, c := range pod.Status.ContainerStatuses {
		n = max(n, c.RestartCount)
	}
	return n
}
