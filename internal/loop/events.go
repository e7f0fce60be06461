package loop

import (
	"fmt"

	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/client-go/tools/cache"
)

// FromTombstone returns the object of an informer event as a T. A delete
// the watch missed arrives wrapped in a DeletedFinalStateUnknown, which is
// unwrapped; anything else that is not a T gives false.
func FromTombstone[T any](obj any) (T, bool) {
	if t, ok := obj.(T); ok {
		return t, true
	}
	if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		t, ok := tomb.Obj.(T)
		return t, ok
	}
	var zero T
	return zero, false
}

// Key returns the namespace/name key of an informer event's object,
// tombstones included. An object without one is reported and gives false.
func Key(obj any) (string, bool) {
	key, err := cache.DeletionHandlingMetaNamespaceKeyFunc(obj)
	if err != nil {
		utilruntime.HandleError(fmt.Errorf("key of %T: %w", obj, err))
		return "", false
	}
	return key, true
}
