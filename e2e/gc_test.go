package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"portal.dev/portal/e2e/framework"
)

// TestGarbageCollection: dependents go with their owner (background and
// foreground), or stay without the reference (orphan).
func TestGarbageCollection(t *testing.T) {
	s := framework.StartServer(t)
	c := s.Client()
	ctx := context.Background()
	cms := c.CoreV1().ConfigMaps("default")
	family := func(owner string, block bool) {
		t.Helper()
		o, err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: owner}}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		dep := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: owner + "-child", OwnerReferences: []metav1.OwnerReference{{
			APIVersion: "v1", Kind: "ConfigMap", Name: o.Name, UID: o.UID, BlockOwnerDeletion: ptr.To(block)}}}}
		if _, err := cms.Create(ctx, dep, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	gone := func(name string) bool {
		_, err := cms.Get(ctx, name, metav1.GetOptions{})
		return apierrors.IsNotFound(err)
	}
	for _, tc := range []struct {
		policy    metav1.DeletionPropagation
		childGone bool
	}{
		{metav1.DeletePropagationBackground, true},
		{metav1.DeletePropagationForeground, true},
		{metav1.DeletePropagationOrphan, false},
	} {
		t.Run(string(tc.policy), func(t *testing.T) {
			owner := "owner-" + strings.ToLower(string(tc.policy))
			family(owner, true)
			if err := cms.Delete(ctx, owner, metav1.DeleteOptions{PropagationPolicy: &tc.policy}); err != nil {
				t.Fatal(err)
			}
			eventually(t, "owner deleted, child handled", func() (bool, string) {
				if !gone(owner) {
					return false, "owner still there"
				}
				if tc.childGone {
					return gone(owner + "-child"), "child still there"
				}
				child, err := cms.Get(ctx, owner+"-child", metav1.GetOptions{})
				return err == nil && len(child.OwnerReferences) == 0, fmt.Sprintf("child %v, err %v", child.OwnerReferences, err)
			})
		})
	}
}
