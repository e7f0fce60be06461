package daemonset

import (
	"sort"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
)

// changes are the Pods a sync creates and deletes.
type changes struct {
	create []string      // Node names, one Pod each
	delete []*corev1.Pod // Pods to delete
}

// failedPolicy decides whether a failed Pod on node is deleted now or left
// for its back-off to pass; the controller keeps the back-off.
type failedPolicy func(ds *appsv1.DaemonSet, pod *corev1.Pod, node string) bool

// manage returns what makes every Node run exactly the daemon Pods it
// should, as upstream's podsShouldBeOnNode does for each Node: create where
// a Pod should run and none exists (a Pod still terminating counts), delete
// failed and succeeded Pods, extra Pods beyond the oldest (beyond the oldest
// old and oldest updated when surging), every Pod on a Node that may no
// longer keep one, and unscheduled Pods for Nodes that are gone.
func manage(ds *appsv1.DaemonSet, nodes []*corev1.Node, byNode map[string][]*corev1.Pod, hash string, failed failedPolicy) changes {
	var out changes
	known := make(map[string]bool, len(nodes))
	for _, node := range nodes {
		known[node.Name] = true
		pods := byNode[node.Name]
		f := nodeFit(ds, node)
		switch {
		case f.shouldRun && len(pods) == 0:
			out.create = append(out.create, node.Name)
		case f.shouldContinue:
			out.delete = append(out.delete, extraPods(ds, pods, node.Name, hash, failed)...)
		case len(pods) > 0:
			out.delete = append(out.delete, live(pods)...)
		}
	}
	// Pods bound to a Node that is gone are the pod garbage collector's, as
	// upstream; those never bound are ours to delete.
	for name, pods := range byNode {
		if known[name] {
			continue
		}
		for _, p := range live(pods) {
			if p.Spec.NodeName == "" {
				out.delete = append(out.delete, p)
			}
		}
	}
	sort.Strings(out.create)
	sortPods(out.delete)
	return out
}

// extraPods returns the Pods to delete on a Node that may keep one: the
// finished ones and all but the one (or, surging, the old and the updated
// one) to keep.
func extraPods(ds *appsv1.DaemonSet, pods []*corev1.Pod, node, hash string, failed failedPolicy) []*corev1.Pod {
	var del, running []*corev1.Pod
	for _, p := range pods {
		switch {
		case p.DeletionTimestamp != nil:
		case p.Status.Phase == corev1.PodFailed:
			if failed(ds, p, node) {
				del = append(del, p)
			}
		case p.Status.Phase == corev1.PodSucceeded:
			// A daemon must keep running; one that exited is replaced.
			del = append(del, p)
		default:
			running = append(running, p)
		}
	}
	if len(running) < 2 {
		return del
	}
	sortOldestFirst(running)
	if !allowsSurge(ds) {
		return append(del, running[1:]...)
	}
	// Surging, a Node may hold the oldest old Pod and the oldest updated
	// one at once; the rolling update removes the old one when the updated
	// one is available.
	var keptOld, keptNew bool
	for _, p := range running {
		isNew := updated(ds, p, hash)
		switch {
		case isNew && !keptNew:
			keptNew = true
		case !isNew && !keptOld:
			keptOld = true
		default:
			del = append(del, p)
		}
	}
	return del
}

func live(pods []*corev1.Pod) []*corev1.Pod {
	var out []*corev1.Pod
	for _, p := range pods {
		if p.DeletionTimestamp == nil {
			out = append(out, p)
		}
	}
	return out
}

// sortOldestFirst orders Pods as upstream ranks a Node's daemon Pods:
// bound before unbound, then oldest, then by name.
func sortOldestFirst(pods []*corev1.Pod) {
	sort.SliceStable(pods, func(i, j int) bool {
		a, b := pods[i], pods[j]
		if (a.Spec.NodeName != "") != (b.Spec.NodeName != "") {
			return a.Spec.NodeName != ""
		}
		if !a.CreationTimestamp.Equal(&b.CreationTimestamp) {
			return a.CreationTimestamp.Before(&b.CreationTimestamp)
		}
		return a.Name < b.Name
	})
}

func sortPods(pods []*corev1.Pod) {
	sort.Slice(pods, func(i, j int) bool { return pods[i].Name < pods[j].Name })
}

// templateGenerationLabel carries, on a daemon Pod, the template
// generation of the DaemonSet that made it, as upstream still sets it.
const templateGenerationLabel = "pod-template-generation"

// updated reports whether pod runs ds's current template: its revision
// hash is hash, or, as upstream still accepts, its template generation is
// ds's. An empty hash names no template, so it matches no Pod by hash.
func updated(ds *appsv1.DaemonSet, pod *corev1.Pod, hash string) bool {
	if hash != "" && pod.Labels[appsv1.DefaultDaemonSetUniqueLabelKey] == hash {
		return true
	}
	gen := ds.Annotations[appsv1.DeprecatedTemplateGeneration]
	return gen != "" && pod.Labels[templateGenerationLabel] == gen
}
