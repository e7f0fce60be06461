package registry

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/apiserver/pkg/registry/rest"
	"k8s.io/apiserver/pkg/storage"
)

// BindingREST serves pods/binding: a scheduler binds a Pod to a Node by
// POSTing a Binding, which sets spec.nodeName once, as upstream does.
type BindingREST struct {
	pods *REST
}

// NewBindingREST returns the binding subresource of the pod store.
func NewBindingREST(pods *REST) *BindingREST { return &BindingREST{pods: pods} }

// New returns an empty Binding.
func (r *BindingREST) New() runtime.Object { return &corev1.Binding{} }

// Destroy is a no-op: the pod store owns the storage.
func (r *BindingREST) Destroy() {}

// Create binds the Pod named in the path to the Binding's target Node.
func (r *BindingREST) Create(ctx context.Context, name string, obj runtime.Object, createValidation rest.ValidateObjectFunc, options *metav1.CreateOptions) (runtime.Object, error) {
	binding, ok := obj.(*corev1.Binding)
	if !ok {
		return nil, apierrors.NewBadRequest(fmt.Sprintf("not a Binding: %T", obj))
	}
	if name != binding.Name {
		return nil, apierrors.NewBadRequest("name in URL does not match name in Binding object")
	}
	if errs := validateBinding(binding); len(errs) > 0 {
		return nil, apierrors.NewInvalid(corev1.SchemeGroupVersion.WithKind("Binding").GroupKind(), binding.Name, errs)
	}
	if createValidation != nil {
		if err := createValidation(ctx, binding.DeepCopyObject()); err != nil {
			return nil, err
		}
	}
	if err := r.assign(ctx, binding, len(options.DryRun) > 0); err != nil {
		return nil, err
	}
	return &metav1.Status{Status: metav1.StatusSuccess, Code: 201}, nil
}

func validateBinding(b *corev1.Binding) field.ErrorList {
	var errs field.ErrorList
	if b.Target.Kind != "" && b.Target.Kind != "Node" {
		errs = append(errs, field.NotSupported(field.NewPath("target", "kind"), b.Target.Kind, []string{"Node", "<empty>"}))
	}
	if b.Target.Name == "" {
		errs = append(errs, field.Required(field.NewPath("target", "name"), ""))
	}
	return errs
}

// assign sets the pod's node in one storage update, refusing a pod that is
// bound already or being deleted.
func (r *BindingREST) assign(ctx context.Context, b *corev1.Binding, dryRun bool) error {
	key, err := r.pods.KeyFunc(ctx, b.Name)
	if err != nil {
		return err
	}
	var pre *storage.Preconditions
	if b.UID != "" {
		pre = storage.NewUIDPreconditions(string(b.UID))
	}
	err = r.pods.Storage.GuaranteedUpdate(ctx, key, &corev1.Pod{}, false, pre,
		func(existing runtime.Object, _ storage.ResponseMeta) (runtime.Object, *uint64, error) {
			pod := existing.(*corev1.Pod).DeepCopy()
			if pod.DeletionTimestamp != nil {
				return nil, nil, fmt.Errorf("pod %s is being deleted, cannot be assigned to a host", pod.Name)
			}
			if pod.Spec.NodeName != "" {
				return nil, nil, fmt.Errorf("pod %v is already assigned to node %q", pod.Name, pod.Spec.NodeName)
			}
			pod.Spec.NodeName = b.Target.Name
			for k, v := range b.Annotations {
				if pod.Annotations == nil {
					pod.Annotations = map[string]string{}
				}
				pod.Annotations[k] = v
			}
			setScheduled(pod)
			return pod, nil, nil
		}, dryRun, nil)
	if err != nil && !apierrors.IsNotFound(err) && !storage.IsNotFound(err) {
		if _, isStatus := err.(apierrors.APIStatus); !isStatus {
			return apierrors.NewConflict(corev1.Resource("pods/binding"), b.Name, err)
		}
	}
	if storage.IsNotFound(err) {
		return apierrors.NewNotFound(corev1.Resource("pods"), b.Name)
	}
	return err
}

func setScheduled(pod *corev1.Pod) {
	cond := corev1.PodCondition{Type: corev1.PodScheduled, Status: corev1.ConditionTrue, LastTransitionTime: metav1.Now()}
	for i := range pod.Status.Conditions {
		if pod.Status.Conditions[i].Type == corev1.PodScheduled {
			pod.Status.Conditions[i] = cond
			return
		}
	}
	pod.Status.Conditions = append(pod.Status.Conditions, cond)
}

var _ rest.NamedCreater = &BindingREST{}
