package workload

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
)

// Claimer decides which objects of type T (Pods, ReplicaSets,
// ControllerRevisions) belong to one owner, by controller reference, and
// writes the adoptions and releases that decision takes, as upstream's
// ControllerRefManager. Build one per sync; it adopts only after
// re-reading the owner once.
type Claimer[T metav1.Object] struct {
	// Owner is the controller object, as the controller's cache has it.
	Owner metav1.Object
	// Kind is Owner's kind, for the ownerReferences written.
	Kind schema.GroupVersionKind
	// Selector picks the objects Owner should own; nil selects nothing.
	Selector labels.Selector
	// Recheck re-reads Owner from the API server with a quorum read (a Get,
	// not the cache). Before its first adoption the Claimer checks that
	// Owner still exists with the same UID and is not being deleted, so a
	// stale cache never adopts objects for an owner that is gone.
	Recheck func(ctx context.Context) (metav1.Object, error)
	// Patch applies a strategic merge patch to obj (see PatchPod and the
	// like).
	Patch func(ctx context.Context, obj T, patch []byte) error

	once       sync.Once
	recheckErr error
}

// Claim returns the objects of objs that Owner owns once it is done:
// those it already controls that still match Selector, and orphans that
// match Selector, which it adopts. It releases the objects it controls
// that no longer match, unless Owner is being deleted. Objects another
// controller owns, and orphans being deleted, are left alone. On a failed
// adoption or release Claim still returns what it claimed, with the
// errors joined.
func (c *Claimer[T]) Claim(ctx context.Context, objs []T) ([]T, error) {
	var claimed []T
	var errs []error
	for _, obj := range objs {
		ok, err := c.claim(ctx, obj)
		if err != nil {
			errs = append(errs, err)
		}
		if ok {
			claimed = append(claimed, obj)
		}
	}
	return claimed, errors.Join(errs...)
}

func (c *Claimer[T]) matches(obj T) bool {
	return c.Selector != nil && c.Selector.Matches(labels.Set(obj.GetLabels()))
}

func (c *Claimer[T]) claim(ctx context.Context, obj T) (bool, error) {
	if ref := metav1.GetControllerOfNoCopy(obj); ref != nil {
		if ref.UID != c.Owner.GetUID() {
			return false, nil
		}
		if c.matches(obj) {
			return true, nil
		}
		if c.Owner.GetDeletionTimestamp() != nil {
			return false, nil
		}
		if err := c.release(ctx, obj); err != nil && !gone(err) {
			return false, err
		}
		return false, nil
	}
	if c.Owner.GetDeletionTimestamp() != nil || !c.matches(obj) ||
		obj.GetDeletionTimestamp() != nil || obj.GetNamespace() != c.Owner.GetNamespace() {
		return false, nil
	}
	if err := c.adopt(ctx, obj); err != nil {
		if gone(err) {
			return false, nil
		}
		return false, err
	}
	return true, nil
}

// gone reports whether a patch failed because the object is gone or was
// replaced by one with another UID, so there is nothing to claim.
func gone(err error) bool {
	return apierrors.IsNotFound(err) || apierrors.IsInvalid(err)
}

func (c *Claimer[T]) canAdopt(ctx context.Context) error {
	c.once.Do(func() {
		if c.Recheck == nil {
			c.recheckErr = fmt.Errorf("adopt for %s/%s: no way to re-read the owner", c.Owner.GetNamespace(), c.Owner.GetName())
			return
		}
		fresh, err := c.Recheck(ctx)
		switch {
		case err != nil:
			c.recheckErr = fmt.Errorf("re-read %s %s/%s before adopting: %w", c.Kind.Kind, c.Owner.GetNamespace(), c.Owner.GetName(), err)
		case fresh.GetUID() != c.Owner.GetUID():
			c.recheckErr = fmt.Errorf("%s %s/%s is gone: got UID %s, want %s", c.Kind.Kind, c.Owner.GetNamespace(), c.Owner.GetName(), fresh.GetUID(), c.Owner.GetUID())
		case fresh.GetDeletionTimestamp() != nil:
			c.recheckErr = fmt.Errorf("%s %s/%s is being deleted", c.Kind.Kind, c.Owner.GetNamespace(), c.Owner.GetName())
		}
	})
	return c.recheckErr
}

func (c *Claimer[T]) adopt(ctx context.Context, obj T) error {
	if err := c.canAdopt(ctx); err != nil {
		return fmt.Errorf("adopt %s/%s: %w", obj.GetNamespace(), obj.GetName(), err)
	}
	patch, err := ownerPatch(obj.GetUID(), ControllerRef(c.Owner, c.Kind))
	if err != nil {
		return err
	}
	if err := c.Patch(ctx, obj, patch); err != nil {
		return fmt.Errorf("adopt %s/%s: %w", obj.GetNamespace(), obj.GetName(), err)
	}
	return nil
}

func (c *Claimer[T]) release(ctx context.Context, obj T) error {
	patch, err := ownerPatch(obj.GetUID(), map[string]any{"$patch": "delete", "uid": c.Owner.GetUID()})
	if err != nil {
		return err
	}
	if err := c.Patch(ctx, obj, patch); err != nil {
		return fmt.Errorf("release %s/%s: %w", obj.GetNamespace(), obj.GetName(), err)
	}
	return nil
}

// ownerPatch is a strategic merge patch of one ownerReference (merged by
// its UID) with the object's own UID as a precondition: a patch meant for
// an object that was deleted and re-created under the same name fails.
func ownerPatch(uid types.UID, ref any) ([]byte, error) {
	return json.Marshal(map[string]any{"metadata": map[string]any{
		"ownerReferences": []any{ref},
		"uid":             uid,
	}})
}
