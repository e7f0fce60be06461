package daemonset

import (
	"context"
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"portal.dev/portal/controller/internal/workload"
)

// kind is what the DaemonSet's ownerReferences name.
var kind = appsv1.SchemeGroupVersion.WithKind("DaemonSet")

// recheck re-reads ds from the API server, for the toolkit's claimers to
// confirm it before adopting anything.
func (c *Controller) recheck(ds *appsv1.DaemonSet) func(context.Context) (metav1.Object, error) {
	return func(ctx context.Context) (metav1.Object, error) {
		return c.client.AppsV1().DaemonSets(ds.Namespace).Get(ctx, ds.Name, metav1.GetOptions{})
	}
}

// claimPods returns the Pods ds controls, adopting orphans its selector
// matches and releasing those it no longer matches, as upstream.
func (c *Controller) claimPods(ctx context.Context, ds *appsv1.DaemonSet, selector labels.Selector) ([]*corev1.Pod, error) {
	all, err := c.podsOf(ds.Namespace, ds.UID)
	if err != nil {
		return nil, fmt.Errorf("list pods of daemonset %s/%s: %w", ds.Namespace, ds.Name, err)
	}
	cl := &workload.Claimer[*corev1.Pod]{
		Owner: ds, Kind: kind, Selector: selector,
		Recheck: c.recheck(ds), Patch: workload.PatchPod(c.client),
	}
	return cl.Claim(ctx, all)
}

// newPod returns ds's Pod for nodeName at the template hash names.
func newPod(ds *appsv1.DaemonSet, nodeName, hash string) *corev1.Pod {
	pod := workload.PodFromTemplate(&ds.Spec.Template, ds, kind, "")
	pod.Labels = withLabel(pod.Labels, workload.RevisionHashLabel, hash)
	if gen := ds.Annotations[appsv1.DeprecatedTemplateGeneration]; gen != "" {
		pod.Labels[templateGenerationLabel] = gen
	}
	pod.Spec = podSpecFor(ds, nodeName)
	return pod
}

// apply makes ch's creates and deletes, at most burstReplicas of each,
// through the toolkit's PodWriter: expectations raised for both first,
// creates in slow-start batches so that a template the API server refuses
// fails once, not once per Node.
func (c *Controller) apply(ctx context.Context, key string, ds *appsv1.DaemonSet, ch changes, hash string) error {
	create, del := ch.create, ch.delete
	if len(create) > burstReplicas {
		create = create[:burstReplicas]
	}
	if len(del) > burstReplicas {
		del = del[:burstReplicas]
	}
	w := workload.PodWriter{Client: c.client, Recorder: c.recorder, Expectations: &c.exp}
	err := w.Write(ctx, key, ds, len(create), func(i int) *corev1.Pod {
		return newPod(ds, create[i], hash)
	}, del)
	if err != nil {
		return fmt.Errorf("sync pods of daemonset %s: %w", key, err)
	}
	return nil
}
