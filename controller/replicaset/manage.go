package replicaset

import (
	"context"
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/klog/v2"

	"portal.dev/portal/controller/internal/workload"
)

// manage creates or deletes Pods so that rs has spec.replicas active
// ones, at most burstReplicas per call.
func (c *Controller) manage(ctx context.Context, key string, rs *appsv1.ReplicaSet, pods []*corev1.Pod) error {
	diff := len(pods) - int(replicas(rs))
	switch {
	case diff < 0:
		return c.createPods(ctx, key, rs, min(-diff, burstReplicas))
	case diff > 0:
		return c.deletePods(ctx, key, rs, pods, min(diff, burstReplicas))
	}
	return nil
}

// createPods creates n Pods through the toolkit's PodWriter, which raises
// the expectations first, so that the informer's add events, however late,
// are counted against them and a sync in between never creates the same
// Pods again.
func (c *Controller) createPods(ctx context.Context, key string, rs *appsv1.ReplicaSet, n int) error {
	klog.FromContext(ctx).V(2).Info("Too few replicas", "replicaSet", klog.KObj(rs), "need", replicas(rs), "creating", n)
	err := c.writer().Write(ctx, key, rs, n, func(int) *corev1.Pod {
		return workload.PodFromTemplate(&rs.Spec.Template, rs, kind, "")
	}, nil)
	if err != nil {
		return fmt.Errorf("create pods for replicaset %s: %w", key, err)
	}
	return nil
}

// deletePods deletes the n Pods upstream would delete first. Expectations
// list their UIDs, so that a Pod seen going twice (marked for deletion,
// then gone) counts once.
func (c *Controller) deletePods(ctx context.Context, key string, rs *appsv1.ReplicaSet, pods []*corev1.Pod, n int) error {
	victims := append([]*corev1.Pod(nil), pods...)
	workload.RankForDeletion(victims, c.relatedPods(rs, pods), c.clock.Now())
	victims = victims[:n]
	klog.FromContext(ctx).V(2).Info("Too many replicas", "replicaSet", klog.KObj(rs), "need", replicas(rs), "deleting", n)
	if err := c.writer().Write(ctx, key, rs, 0, nil, victims); err != nil {
		return fmt.Errorf("delete pods of replicaset %s: %w", key, err)
	}
	return nil
}

func (c *Controller) writer() workload.PodWriter {
	return workload.PodWriter{Client: c.client, Recorder: c.recorder, Expectations: c.expectations}
}

// relatedPods are the Pods counted for colocation when choosing which to
// delete: those of every ReplicaSet with rs's controller (a Deployment's
// old and new ones), or rs's own when it has none, as upstream.
func (c *Controller) relatedPods(rs *appsv1.ReplicaSet, own []*corev1.Pod) []*corev1.Pod {
	ref := metav1.GetControllerOfNoCopy(rs)
	if ref == nil {
		return own
	}
	sets, err := c.replicaSets.ReplicaSets(rs.Namespace).List(labels.Everything())
	if err != nil {
		return own
	}
	var related []*corev1.Pod
	for _, sibling := range sets {
		if r := metav1.GetControllerOfNoCopy(sibling); r == nil || r.UID != ref.UID {
			continue
		}
		pods, err := c.pods.Candidates(sibling.Namespace, sibling.UID)
		if err != nil {
			return own
		}
		for _, p := range pods {
			if metav1.IsControlledBy(p, sibling) {
				related = append(related, p)
			}
		}
	}
	return related
}
