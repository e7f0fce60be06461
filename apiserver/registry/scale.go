package registry

import (
	"context"
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/managedfields"
	genericregistry "k8s.io/apiserver/pkg/registry/generic/registry"
	"k8s.io/apiserver/pkg/registry/rest"
	"sigs.k8s.io/structured-merge-diff/v6/fieldpath"

	"portal.dev/portal/apiserver/printers"
	"portal.dev/portal/apiserver/validation"
)

// replicasPath is where a Scale's spec.replicas lives in its parent, per
// API version, so that field ownership moves between the two: a manager
// that sets replicas through the scale subresource owns spec.replicas of
// the Deployment, and server-side apply conflicts accordingly.
var replicasPath = managedfields.ResourcePathMappings{
	appsv1.SchemeGroupVersion.String(): fieldpath.MakePathOrDie("spec", "replicas"),
}

// ScaleREST serves the scale subresource of a Deployment, ReplicaSet or
// StatefulSet as an autoscaling/v1 Scale, as upstream does: reads show
// spec.replicas, status.replicas and the selector as a string; writes set
// only spec.replicas, through the parent's own update strategy (so
// validation runs and the generation moves) and with its resourceVersion
// as the precondition.
type ScaleREST struct {
	store    *genericregistry.Store
	resource schema.GroupResource
}

// NewScaleREST returns the scale subresource of the workloads in store.
func NewScaleREST(store *genericregistry.Store) *ScaleREST {
	gr := store.DefaultQualifiedResource
	return &ScaleREST{store: store, resource: schema.GroupResource{Group: gr.Group, Resource: gr.Resource + "/scale"}}
}

// New returns an empty Scale.
func (r *ScaleREST) New() runtime.Object { return &autoscalingv1.Scale{} }

// Destroy is a no-op: the main resource owns the storage.
func (r *ScaleREST) Destroy() {}

// GroupVersionKind tells discovery and the codecs that this subresource
// speaks autoscaling/v1 Scale, not the parent's kind.
func (r *ScaleREST) GroupVersionKind(schema.GroupVersion) schema.GroupVersionKind {
	return autoscalingv1.SchemeGroupVersion.WithKind("Scale")
}

// Get returns the Scale of the named workload.
func (r *ScaleREST) Get(ctx context.Context, name string, options *metav1.GetOptions) (runtime.Object, error) {
	obj, err := r.store.Get(ctx, name, options)
	if err != nil {
		return nil, err
	}
	return scaleOf(obj)
}

// ConvertToTable prints Scales for kubectl get --subresource=scale.
func (r *ScaleREST) ConvertToTable(ctx context.Context, object runtime.Object, tableOptions runtime.Object) (*metav1.Table, error) {
	return printers.ScaleConvertor.ConvertToTable(ctx, object, tableOptions)
}

// Update changes the workload's spec.replicas from the updated Scale and
// returns the Scale of the stored result. PATCH comes here too, as a read
// of the Scale, the patch, and this update.
func (r *ScaleREST) Update(ctx context.Context, name string, objInfo rest.UpdatedObjectInfo, createValidation rest.ValidateObjectFunc, updateValidation rest.ValidateObjectUpdateFunc, forceAllowCreate bool, options *metav1.UpdateOptions) (runtime.Object, bool, error) {
	info := &scaleUpdate{name: name, resource: r.resource, req: objInfo}
	// Admission sees the Scale, as upstream's does, not the parent.
	obj, _, err := r.store.Update(ctx, name, info, scaleCreateValidation(createValidation),
		scaleUpdateValidation(updateValidation), false, options)
	if err != nil {
		return nil, false, err
	}
	s, err := scaleOf(obj)
	return s, false, err
}

func scaleCreateValidation(f rest.ValidateObjectFunc) rest.ValidateObjectFunc {
	if f == nil {
		return nil
	}
	return func(ctx context.Context, obj runtime.Object) error {
		s, err := scaleOf(obj)
		if err != nil {
			return err
		}
		return f(ctx, s)
	}
}

func scaleUpdateValidation(f rest.ValidateObjectUpdateFunc) rest.ValidateObjectUpdateFunc {
	if f == nil {
		return nil
	}
	return func(ctx context.Context, obj, old runtime.Object) error {
		s, err := scaleOf(obj)
		if err != nil {
			return err
		}
		oldScale, err := scaleOf(old)
		if err != nil {
			return err
		}
		return f(ctx, s, oldScale)
	}
}

// scaleUpdate turns the client's update of a Scale into an update of its
// parent.
type scaleUpdate struct {
	name     string
	resource schema.GroupResource
	req      rest.UpdatedObjectInfo
}

func (u *scaleUpdate) Preconditions() *metav1.Preconditions { return u.req.Preconditions() }

func (u *scaleUpdate) UpdatedObject(ctx context.Context, oldObj runtime.Object) (runtime.Object, error) {
	parent := oldObj.DeepCopyObject()
	pm := objectMeta(parent)
	// The store hands an empty object when the parent does not exist.
	if pm.ResourceVersion == "" {
		return nil, apierrors.NewNotFound(u.resource, u.name)
	}
	fields := managedfields.NewScaleHandler(pm.ManagedFields, appsv1.SchemeGroupVersion, replicasPath)
	old, err := scaleOf(parent)
	if err != nil {
		return nil, err
	}
	if old.ManagedFields, err = fields.ToSubresource(); err != nil {
		return nil, err
	}
	// An apply naming a field Scale does not have is the client's error,
	// as on the main resource (clientApplyErrors).
	obj, err := clientApplyErrors{u.req}.UpdatedObject(ctx, old)
	if err != nil {
		return nil, err
	}
	scale, ok := obj.(*autoscalingv1.Scale)
	if !ok || scale == nil {
		return nil, apierrors.NewBadRequest(fmt.Sprintf("expected a Scale, got %T", obj))
	}
	if errs := validation.ValidateScale(scale); len(errs) > 0 {
		return nil, apierrors.NewInvalid(autoscalingv1.SchemeGroupVersion.WithKind("Scale").GroupKind(), u.name, errs)
	}
	if scale.UID != "" && scale.UID != pm.UID {
		return nil, apierrors.NewConflict(u.resource, u.name,
			fmt.Errorf("precondition failed: UID in precondition: %v, UID in object meta: %v", scale.UID, pm.UID))
	}
	replicas, _, _ := scaleFields(parent)
	n := scale.Spec.Replicas
	*replicas = &n
	// The Scale's resourceVersion is the parent's: the store refuses the
	// write when it is stale, and an empty one writes unconditionally.
	pm.ResourceVersion = scale.ResourceVersion
	if pm.ManagedFields, err = fields.ToParent(scale.ManagedFields); err != nil {
		return nil, err
	}
	return parent, nil
}

// scaleOf returns the Scale view of a workload.
func scaleOf(obj runtime.Object) (*autoscalingv1.Scale, error) {
	replicas, selector, statusReplicas := scaleFields(obj)
	if replicas == nil {
		return nil, fmt.Errorf("%T has no scale subresource", obj)
	}
	sel, err := metav1.LabelSelectorAsSelector(selector)
	if err != nil {
		return nil, apierrors.NewInternalError(fmt.Errorf("selector of %T: %w", obj, err))
	}
	m := objectMeta(obj)
	s := &autoscalingv1.Scale{
		ObjectMeta: metav1.ObjectMeta{Name: m.Name, Namespace: m.Namespace, UID: m.UID,
			ResourceVersion: m.ResourceVersion, CreationTimestamp: m.CreationTimestamp},
		Status: autoscalingv1.ScaleStatus{Replicas: statusReplicas, Selector: sel.String()},
	}
	if *replicas != nil {
		s.Spec.Replicas = **replicas
	}
	return s, nil
}

// scaleFields returns where a scalable workload keeps its desired replicas,
// its selector and its observed replicas; replicas is nil for other kinds.
func scaleFields(obj runtime.Object) (replicas **int32, selector *metav1.LabelSelector, status int32) {
	switch o := obj.(type) {
	case *appsv1.Deployment:
		return &o.Spec.Replicas, o.Spec.Selector, o.Status.Replicas
	case *appsv1.ReplicaSet:
		return &o.Spec.Replicas, o.Spec.Selector, o.Status.Replicas
	case *appsv1.StatefulSet:
		return &o.Spec.Replicas, o.Spec.Selector, o.Status.Replicas
	}
	return nil, nil, 0
}

var (
	_ rest.Patcher                  = &ScaleREST{}
	_ rest.GroupVersionKindProvider = &ScaleREST{}
	_ rest.TableConvertor           = &ScaleREST{}
)
