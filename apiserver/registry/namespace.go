package registry

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
	genericregistry "k8s.io/apiserver/pkg/registry/generic/registry"
	"k8s.io/apiserver/pkg/registry/rest"
	"k8s.io/apiserver/pkg/storage"
	"sigs.k8s.io/structured-merge-diff/v6/fieldpath"
)

// NamespaceREST gives namespaces upstream's two-phase deletion: the first
// DELETE marks the namespace Terminating; the namespace controller empties
// it, clears spec.finalizers through /finalize and deletes it again, which
// then removes it.
type NamespaceREST struct {
	*REST
}

// Delete marks the namespace terminating, or removes it once finalized.
func (r *NamespaceREST) Delete(ctx context.Context, name string, deleteValidation rest.ValidateObjectFunc, options *metav1.DeleteOptions) (runtime.Object, bool, error) {
	obj, err := r.Get(ctx, name, &metav1.GetOptions{})
	if err != nil {
		return nil, false, err
	}
	ns := obj.(*corev1.Namespace)
	if options == nil {
		options = metav1.NewDeleteOptions(0)
	}
	if err := checkPreconditions(ns, options.Preconditions); err != nil {
		return nil, false, err
	}
	if ns.DeletionTimestamp == nil {
		return r.markTerminating(ctx, ns, deleteValidation, options)
	}
	if len(ns.Spec.Finalizers) > 0 {
		// Still being emptied: deleting again changes nothing.
		return ns, false, nil
	}
	return r.REST.Delete(ctx, name, deleteValidation, options)
}

func (r *NamespaceREST) markTerminating(ctx context.Context, ns *corev1.Namespace, deleteValidation rest.ValidateObjectFunc, options *metav1.DeleteOptions) (runtime.Object, bool, error) {
	if deleteValidation != nil {
		if err := deleteValidation(ctx, ns); err != nil {
			return nil, false, err
		}
	}
	key, err := r.KeyFunc(ctx, ns.Name)
	if err != nil {
		return nil, false, err
	}
	out := &corev1.Namespace{}
	now := metav1.Now()
	dryRun := len(options.DryRun) > 0
	err = r.Storage.GuaranteedUpdate(ctx, key, out, false, storage.NewUIDPreconditions(string(ns.UID)),
		func(existing runtime.Object, _ storage.ResponseMeta) (runtime.Object, *uint64, error) {
			cur := existing.(*corev1.Namespace).DeepCopy()
			if cur.DeletionTimestamp == nil {
				cur.DeletionTimestamp = &now
				zero := int64(0)
				cur.DeletionGracePeriodSeconds = &zero
			}
			cur.Status.Phase = corev1.NamespaceTerminating
			return cur, nil, nil
		}, dryRun, nil)
	if err != nil {
		return nil, false, err
	}
	if len(out.Spec.Finalizers) == 0 && len(out.Finalizers) == 0 {
		return r.REST.Delete(ctx, out.Name, nil, options)
	}
	return out, false, nil
}

// shouldDeleteNamespaceDuringUpdate keeps a terminating namespace that an
// update (its conditions written to status) leaves with spec.finalizers
// still to clear: the generic rule looks only at metadata.finalizers, and
// would delete it with its content still there, as upstream's namespace
// registry avoids the same way.
func shouldDeleteNamespaceDuringUpdate(ctx context.Context, key string, obj, existing runtime.Object) bool {
	ns, ok := obj.(*corev1.Namespace)
	return ok && len(ns.Spec.Finalizers) == 0 && genericregistry.ShouldDeleteDuringUpdate(ctx, key, obj, existing)
}

func checkPreconditions(ns *corev1.Namespace, p *metav1.Preconditions) error {
	if p == nil {
		return nil
	}
	if p.UID != nil && *p.UID != ns.UID {
		return apierrors.NewConflict(corev1.Resource("namespaces"), ns.Name,
			field.Invalid(field.NewPath("metadata", "uid"), *p.UID, "precondition failed: UID in precondition does not match the UID of the namespace"))
	}
	if p.ResourceVersion != nil && *p.ResourceVersion != ns.ResourceVersion {
		return apierrors.NewConflict(corev1.Resource("namespaces"), ns.Name,
			field.Invalid(field.NewPath("metadata", "resourceVersion"), *p.ResourceVersion, "precondition failed: ResourceVersion in precondition does not match the ResourceVersion of the namespace"))
	}
	return nil
}

// FinalizeREST serves namespaces/finalize: the only way to change
// spec.finalizers.
type FinalizeREST struct {
	store *genericregistry.Store
}

// NewFinalizeREST returns the finalize subresource of a namespace store.
func NewFinalizeREST(ns *REST) *FinalizeREST {
	s := *ns.Store
	st := finalizeStrategy{ns.Store.UpdateStrategy.(*strategy)}
	s.UpdateStrategy = st
	s.ResetFieldsStrategy = st
	return &FinalizeREST{store: &s}
}

// New returns an empty Namespace.
func (r *FinalizeREST) New() runtime.Object { return &corev1.Namespace{} }

// Destroy is a no-op: the main resource owns the storage.
func (r *FinalizeREST) Destroy() {}

// Update changes spec.finalizers and nothing else.
func (r *FinalizeREST) Update(ctx context.Context, name string, objInfo rest.UpdatedObjectInfo, createValidation rest.ValidateObjectFunc, updateValidation rest.ValidateObjectUpdateFunc, forceAllowCreate bool, options *metav1.UpdateOptions) (runtime.Object, bool, error) {
	return r.store.Update(ctx, name, objInfo, createValidation, updateValidation, false, options)
}

// GetResetFields returns what finalize never writes.
func (r *FinalizeREST) GetResetFields() map[fieldpath.APIVersion]*fieldpath.Set {
	return r.store.GetResetFields()
}

type finalizeStrategy struct{ *strategy }

func (finalizeStrategy) PrepareForUpdate(ctx context.Context, obj, old runtime.Object) {
	ns, oldNs := obj.(*corev1.Namespace), old.(*corev1.Namespace)
	finalizers := ns.Spec.Finalizers
	*ns = *oldNs.DeepCopy()
	ns.Spec.Finalizers = finalizers
}

func (finalizeStrategy) ValidateUpdate(ctx context.Context, obj, old runtime.Object) field.ErrorList {
	var errs field.ErrorList
	for i, f := range obj.(*corev1.Namespace).Spec.Finalizers {
		if f == "" {
			errs = append(errs, field.Required(field.NewPath("spec", "finalizers").Index(i), ""))
		}
	}
	return errs
}

func (finalizeStrategy) GetResetFields() map[fieldpath.APIVersion]*fieldpath.Set {
	return map[fieldpath.APIVersion]*fieldpath.Set{
		"v1": fieldpath.NewSet(fieldpath.MakePathOrDie("status"), fieldpath.MakePathOrDie("metadata")),
	}
}
