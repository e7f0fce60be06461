package statefulset

import (
	"context"
	"encoding/json"
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
)

// claimPods returns the pods set owns, as upstream claims them: among
// the pods whose names are the set's, an orphan its selector matches is
// adopted, and an owned pod it no longer matches is released.
func (c *Controller) claimPods(ctx context.Context, set *appsv1.StatefulSet, selector labels.Selector) ([]*corev1.Pod, error) {
	all, err := c.pods.Pods(set.Namespace).List(labels.Everything())
	if err != nil {
		return nil, fmt.Errorf("list pods of statefulset %s/%s: %w", set.Namespace, set.Name, err)
	}
	var owned []*corev1.Pod
	for _, pod := range all {
		if _, ok := ordinalOf(set, pod); !ok {
			continue
		}
		ref := metav1.GetControllerOf(pod)
		matches := selector.Matches(labels.Set(pod.Labels))
		switch {
		case ref != nil && ref.UID == set.UID && matches:
			owned = append(owned, pod)
		case ref != nil && ref.UID == set.UID:
			if err := c.patchOwner(ctx, pod, releasePatch(set, pod)); err != nil {
				return nil, fmt.Errorf("release pod %s/%s: %w", pod.Namespace, pod.Name, err)
			}
		case ref == nil && matches && pod.DeletionTimestamp == nil:
			adopted, err := c.adopt(ctx, set, pod)
			if err != nil {
				return nil, err
			}
			if adopted != nil {
				owned = append(owned, adopted)
			}
		}
	}
	return owned, nil
}

// adopt makes set the controller of an orphan pod, after checking with
// the API server (not the cache) that set is still there and not being
// deleted. It returns nil when the pod is gone.
func (c *Controller) adopt(ctx context.Context, set *appsv1.StatefulSet, pod *corev1.Pod) (*corev1.Pod, error) {
	fresh, err := c.client.AppsV1().StatefulSets(set.Namespace).Get(ctx, set.Name, metav1.GetOptions{})
	if err != nil {
		return nil, fmt.Errorf("check statefulset %s/%s before adopting: %w", set.Namespace, set.Name, err)
	}
	if fresh.UID != set.UID || fresh.DeletionTimestamp != nil {
		return nil, fmt.Errorf("statefulset %s/%s changed, not adopting pod %s", set.Namespace, set.Name, pod.Name)
	}
	ref := metav1.NewControllerRef(set, appsv1.SchemeGroupVersion.WithKind("StatefulSet"))
	patch := ownerPatch(pod.UID, map[string]any{
		"apiVersion": ref.APIVersion, "kind": ref.Kind, "name": ref.Name, "uid": ref.UID,
		"controller": true, "blockOwnerDeletion": true,
	})
	if err := c.patchOwner(ctx, pod, patch); err != nil {
		return nil, fmt.Errorf("adopt pod %s/%s: %w", pod.Namespace, pod.Name, err)
	}
	out := pod.DeepCopy()
	out.OwnerReferences = append(out.OwnerReferences, *ref)
	return out, nil
}

func releasePatch(set *appsv1.StatefulSet, pod *corev1.Pod) []byte {
	return ownerPatch(pod.UID, map[string]any{"$patch": "delete", "uid": set.UID})
}

// ownerPatch is a strategic merge patch of one ownerReference (merged by
// uid), guarded by the pod's uid so that it never lands on a same-named
// newer pod.
func ownerPatch(podUID types.UID, ref map[string]any) []byte {
	patch, _ := json.Marshal(map[string]any{"metadata": map[string]any{
		"ownerReferences": []any{ref}, "uid": podUID,
	}})
	return patch
}

func (c *Controller) patchOwner(ctx context.Context, pod *corev1.Pod, patch []byte) error {
	_, err := c.client.CoreV1().Pods(pod.Namespace).Patch(ctx, pod.Name, types.StrategicMergePatchType, patch, metav1.PatchOptions{})
	if apierrors.IsNotFound(err) || apierrors.IsInvalid(err) {
		return nil // gone, or replaced by a pod with another uid
	}
	return err
}
