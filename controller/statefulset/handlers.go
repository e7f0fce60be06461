package statefulset

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"portal.dev/portal/internal/loop"
)

// Informer event handlers: every event becomes the keys of the
// StatefulSets it may affect, and nothing else happens on the informer's
// goroutine.

func (c *Controller) enqueue(obj any) {
	if key, ok := loop.Key(obj); ok {
		c.loop.Add(key)
	}
}

// adopters returns the keys of the StatefulSets that may adopt an orphan
// pod: those whose selector matches it and whose pods' names it has.
func (c *Controller) adopters(pod *corev1.Pod) []string {
	sets, err := c.sets.StatefulSets(pod.Namespace).List(labels.Everything())
	if err != nil {
		return nil
	}
	var keys []string
	for _, set := range sets {
		sel, err := metav1.LabelSelectorAsSelector(set.Spec.Selector)
		if err != nil || sel.Empty() || !sel.Matches(labels.Set(pod.Labels)) {
			continue
		}
		if _, ok := ordinalOf(set, pod); ok {
			keys = append(keys, set.Namespace+"/"+set.Name)
		}
	}
	return keys
}
