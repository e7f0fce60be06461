package replicaset

import (
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"portal.dev/portal/controller/internal/podutil"
	"portal.dev/portal/internal/loop"
)

// Informer event handlers: they turn events into ReplicaSet keys and count
// what the controller's own writes were expected to cause.

func (c *Controller) enqueue(obj any) {
	if key, ok := loop.Key(obj); ok {
		c.loop.Add(key)
	}
}

func (c *Controller) onReplicaSetUpdate(oldObj, newObj any) {
	old, ok1 := oldObj.(*appsv1.ReplicaSet)
	cur, ok2 := newObj.(*appsv1.ReplicaSet)
	if !ok1 || !ok2 {
		return
	}
	if old.UID != cur.UID {
		// Deleted and re-created between two events: the old one's
		// expectations mean nothing for the new one.
		c.onReplicaSetDelete(old)
	}
	c.enqueue(cur)
}

func (c *Controller) onReplicaSetDelete(obj any) {
	rs, ok := loop.FromTombstone[*appsv1.ReplicaSet](obj)
	if !ok {
		return
	}
	key := rs.Namespace + "/" + rs.Name
	c.expectations.Delete(key)
	c.loop.Add(key)
}

// checkAvailableLater queues a ReplicaSet with minReadySeconds again when
// one of its Pods turns ready, for when that Pod becomes available:
// availability comes with no event of its own.
func (c *Controller) checkAvailableLater(key string, old, cur *corev1.Pod) {
	if podutil.IsReady(old) || !podutil.IsReady(cur) {
		return
	}
	rs, err := c.replicaSets.ReplicaSets(cur.Namespace).Get(metav1.GetControllerOfNoCopy(cur).Name)
	if err == nil && rs.Spec.MinReadySeconds > 0 {
		c.loop.AddAfter(key, time.Duration(rs.Spec.MinReadySeconds)*time.Second+time.Second)
	}
}
