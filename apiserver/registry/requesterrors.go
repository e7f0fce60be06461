package registry

import (
	"context"
	"errors"
	"fmt"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metainternalversion "k8s.io/apimachinery/pkg/apis/meta/internalversion"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/apiserver/pkg/registry/rest"
	"k8s.io/apiserver/pkg/storage"
)

// Watch is the generic store's, except that a resourceVersion that is not
// one (resourceVersion=abc) is the client's error, 400, as a list answers
// it: the storage layer reports it as a plain invalid-storage error, which
// the handler would send as a 500.
func (r *REST) Watch(ctx context.Context, options *metainternalversion.ListOptions) (watch.Interface, error) {
	w, err := r.Store.Watch(ctx, options)
	if err != nil && storage.IsInvalidError(err) {
		return nil, apierrors.NewBadRequest(fmt.Sprintf("invalid resource version: %v", err))
	}
	return w, err
}

// Update is the generic store's, with a server-side apply patch that does
// not fit its kind's schema refused as the client's error (see
// clientApplyErrors).
func (r *REST) Update(ctx context.Context, name string, objInfo rest.UpdatedObjectInfo, createValidation rest.ValidateObjectFunc, updateValidation rest.ValidateObjectUpdateFunc, forceAllowCreate bool, options *metav1.UpdateOptions) (runtime.Object, bool, error) {
	return r.Store.Update(ctx, name, clientApplyErrors{objInfo}, createValidation, updateValidation, forceAllowCreate, options)
}

// typedPatchError starts the error the field manager returns when an
// applied object names a field its kind does not have, or breaks a list's
// keys: "failed to create typed patch object (...): .bogus: field not
// declared in schema".
const typedPatchError = "failed to create typed patch object"

// clientApplyErrors turns the field manager's typed-patch error into 400
// BadRequest with the same message. Upstream's field manager returns it as
// a plain error, which its handler answers with 500 (kubernetes issue
// 122480); the fault is in the request, and a client must not retry it.
type clientApplyErrors struct{ rest.UpdatedObjectInfo }

func (i clientApplyErrors) UpdatedObject(ctx context.Context, old runtime.Object) (runtime.Object, error) {
	obj, err := i.UpdatedObjectInfo.UpdatedObject(ctx, old)
	var status apierrors.APIStatus
	if err != nil && !errors.As(err, &status) && strings.HasPrefix(err.Error(), typedPatchError) {
		return obj, apierrors.NewBadRequest(err.Error())
	}
	return obj, err
}
