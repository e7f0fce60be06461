package workload

import (
	"math"
	"sort"
	"strconv"
	"time"

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

// IsAvailable reports whether pod has been ready for minReadySeconds at
// now, as upstream counts availableReplicas.
func IsAvailable(pod *corev1.Pod, minReadySeconds int32, now time.Time) bool {
	c := podutil.ReadyCondition(pod)
	if c == nil || c.Status != corev1.ConditionTrue {
		return false
	}
	if minReadySeconds == 0 {
		return true
	}
	ready := time.Duration(minReadySeconds) * time.Second
	return !c.LastTransitionTime.IsZero() && c.LastTransitionTime.Add(ready).Before(now)
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
// ready; a lower pod-deletion-cost annotation before a higher one (as
// upstream's ReplicaSets do); ready for less time before ready for
// longer; more restarts before fewer; newer before older. The sort is
// stable.
func SortForDeletion(pods []*corev1.Pod) {
	RankForDeletion(pods, nil, time.Time{})
}

// RankForDeletion orders pods as upstream's ReplicaSet controller does
// (ActivePodsWithRanks): as SortForDeletion, but after the deletion cost,
// Pods sharing their node with more of related (the active Pods of the
// owner and, for a ReplicaSet of a Deployment, of its siblings) go first,
// which spreads what is left across nodes; and with now set, ready and
// creation times are compared on a logarithmic scale of their age, Pods
// of about the same age in UID order, so that a scale-down does not
// always take the very newest.
func RankForDeletion(pods, related []*corev1.Pod, now time.Time) {
	onNode := map[string]int{}
	for _, p := range related {
		if IsActive(p) {
			onNode[p.Spec.NodeName]++
		}
	}
	ranked := make([]rankedPod, len(pods))
	for i, p := range pods {
		ranked[i] = rankedPod{p, onNode[p.Spec.NodeName]}
	}
	sort.SliceStable(ranked, func(i, j int) bool { return deleteBefore(ranked[i], ranked[j], now) })
	for i := range ranked {
		pods[i] = ranked[i].pod
	}
}

// rankedPod is a Pod with the number of related Pods on its node.
type rankedPod struct {
	pod       *corev1.Pod
	colocated int
}

func deleteBefore(x, y rankedPod, now time.Time) bool {
	a, b := x.pod, y.pod
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
	if ca, cb := deletionCost(a), deletionCost(b); ca != cb {
		return ca < cb
	}
	if x.colocated != y.colocated {
		return x.colocated > y.colocated
	}
	if ra && rb {
		if ta, tb := readySince(a), readySince(b); !ta.Equal(&tb) {
			return newerFirst(a, b, ta, tb, now)
		}
	}
	if ca, cb := maxRestarts(a), maxRestarts(b); ca != cb {
		return ca > cb
	}
	if ta, tb := a.CreationTimestamp, b.CreationTimestamp; !ta.Equal(&tb) {
		return newerFirst(a, b, ta, tb, now)
	}
	return false
}

// newerFirst reports whether a (at ta) goes before b (at tb) on "newest
// first": exactly without now, else by the power of two of their ages,
// then by UID.
func newerFirst(a, b *corev1.Pod, ta, tb metav1.Time, now time.Time) bool {
	if now.IsZero() || ta.IsZero() || tb.IsZero() {
		return afterOrZero(ta, tb)
	}
	if la, lb := ageBucket(now, ta), ageBucket(now, tb); la != lb {
		return la < lb
	}
	return a.UID < b.UID
}

// ageBucket is floor(log2) of the age of t at now in nanoseconds, -1 for
// no age.
func ageBucket(now time.Time, t metav1.Time) int {
	d := now.Sub(t.Time)
	if d <= 0 {
		return -1
	}
	return int(math.Log2(float64(d)))
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

// DeletionCostAnnotation ranks a controller's Pods for deletion on a
// scale-down: lower costs go first. Missing or not an int32 counts as 0.
const DeletionCostAnnotation = "controller.kubernetes.io/pod-deletion-cost"

func deletionCost(pod *corev1.Pod) int32 {
	v, ok := pod.Annotations[DeletionCostAnnotation]
	if !ok {
		return 0
	}
	n, err := strconv.ParseInt(v, 10, 32)
	if err != nil {
		return 0
	}
	return int32(n)
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
