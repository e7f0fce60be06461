package registry

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/validation/field"
	genericapirequest "k8s.io/apiserver/pkg/endpoints/request"
	genericregistry "k8s.io/apiserver/pkg/registry/generic/registry"
	"k8s.io/apiserver/pkg/storage"

	"portal.dev/portal/allocator"
)

// allocate reserves what svc needs (see allocator.Allocate) and returns the
// FinishFunc that settles the reservations with the write's outcome.
//
// A failed write is not always one that did not happen: etcd answers a
// write it could not confirm in time (a leader lost mid-request) with an
// error, and may apply it all the same. So before giving back what a
// failed write reserved, the stored Service is read from etcd; what it
// holds stays reserved, and when it cannot be read nothing is given back
// (the repair loop frees reservations no Service holds). Released on a
// write that landed, a node port would go to a second Service.
func allocate(ctx context.Context, cfg Config, stored serviceGetter, svc, old *corev1.Service, dryRun bool) (genericregistry.FinishFunc, error) {
	if cfg.Allocator == nil {
		return func(context.Context, bool) {}, nil
	}
	op, err := cfg.Allocator.Allocate(ctx, svc, old, dryRun)
	if err != nil {
		if errs := allocationErrors(svc, err); errs != nil {
			return nil, invalidService(svc, errs)
		}
		return nil, allocationFailure(err)
	}
	return func(ctx context.Context, success bool) {
		if success || stored == nil {
			op.Finish(ctx, success)
			return
		}
		current, err := stored(ctx, svc.Namespace, svc.Name)
		if err != nil {
			return
		}
		if current != nil {
			op.Keep(allocator.Keys(current))
		}
		op.Finish(ctx, false)
	}, nil
}

// storedReadTimeout bounds the read of a Service whose write failed.
const storedReadTimeout = 10 * time.Second

// serviceGetter returns the stored Service ns/name, nil when there is none.
type serviceGetter func(ctx context.Context, ns, name string) (*corev1.Service, error)

// storedServices reads Services from etcd, past the watch cache: the
// Services' own store, given once it is built.
type storedServices struct {
	store *genericregistry.Store
}

func (s *storedServices) bind(store *genericregistry.Store) { s.store = store }

// get returns the stored Service ns/name, or nil when there is none.
func (s *storedServices) get(ctx context.Context, ns, name string) (*corev1.Service, error) {
	if s.store == nil {
		return nil, errors.New("the Services' store is not built")
	}
	// The request may be over already; the read still gets its own time.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), storedReadTimeout)
	defer cancel()
	ctx = genericapirequest.WithNamespace(ctx, ns)
	key, err := s.store.KeyFunc(ctx, name)
	if err != nil {
		return nil, err
	}
	out := &corev1.Service{}
	err = s.store.Storage.Get(ctx, key, storage.GetOptions{}, out)
	switch {
	case storage.IsNotFound(err):
		return nil, nil
	case err != nil:
		return nil, err
	}
	return out, nil
}

// allocationErrors reports an allocator error on the fields upstream's
// service registry names, with its messages: a refused cluster IP on
// spec.clusterIPs with the whole list as the value, a refused node port on
// its spec.ports entry, a full range on the field that needed a value from
// it (a Service with many ports ran out of node ports, not of cluster IPs).
// Anything else is not the Service's fault and gives nil (see
// allocationFailure).
func allocationErrors(svc *corev1.Service, err error) field.ErrorList {
	var refused allocator.RequestErrors
	var full *allocator.FullError
	switch {
	case errors.As(err, &refused):
		errs := make(field.ErrorList, 0, len(refused))
		for _, r := range refused {
			errs = append(errs, requestFieldError(svc, r))
		}
		return errs
	case errors.As(err, &full) && full.Field == allocator.FieldNodePort:
		return field.ErrorList{field.Invalid(field.NewPath("spec", "ports").Index(full.Index).Child("nodePort"), 0,
			"failed to allocate a nodePort: "+err.Error())}
	case errors.As(err, &full) && full.Field == allocator.FieldHealthCheckNodePort:
		return field.ErrorList{field.Invalid(field.NewPath("spec", "healthCheckNodePort"), 0,
			"failed to allocate a HealthCheck NodePort: "+err.Error())}
	case errors.Is(err, allocator.ErrFull), errors.Is(err, allocator.ErrNoRange):
		return field.ErrorList{field.Invalid(field.NewPath("spec", "clusterIPs"), "", "failed to allocate: "+err.Error())}
	}
	return nil
}

// allocationFailure answers an allocation that failed for a reason other
// than the Service itself, as upstream answers a storage failure: a server
// whose etcd member lost quorum times out (504) or is unavailable (503), so
// the client retries, elsewhere if it can; anything else is a 500. None of
// them is a 422: the Service is fine, and a client must not give up on it.
// No Retry-After is set: client-go would then retry the same request up to
// ten times against a server that may stay cut off, each waiting out etcd's
// own timeout, instead of reporting the failure.
func allocationFailure(err error) error {
	var etcdErr rpctypes.EtcdError
	switch {
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, rpctypes.ErrTimeout),
		errors.Is(err, rpctypes.ErrTimeoutDueToLeaderFail), errors.Is(err, rpctypes.ErrTimeoutDueToConnectionLost),
		errors.Is(err, rpctypes.ErrTimeoutWaitAppliedIndex):
		return apierrors.NewTimeoutError(fmt.Sprintf("storage did not answer while allocating the Service's cluster IPs and ports, please try again: %v", err), 0)
	case errors.As(err, &etcdErr) && etcdErr.Code() == codes.Unavailable, status.Code(err) == codes.Unavailable:
		return apierrors.NewServiceUnavailable(fmt.Sprintf("storage is unavailable for allocating the Service's cluster IPs and ports, please try again: %v", err))
	}
	return apierrors.NewInternalError(fmt.Errorf("allocate the Service's cluster IPs and ports: %w", err))
}

func requestFieldError(svc *corev1.Service, r *allocator.RequestError) *field.Error {
	switch r.Field {
	case allocator.FieldNodePort:
		return field.Invalid(field.NewPath("spec", "ports").Index(r.Index).Child("nodePort"), r.Port, r.Err.Error())
	case allocator.FieldHealthCheckNodePort:
		return field.Invalid(field.NewPath("spec", "healthCheckNodePort"), r.Port,
			fmt.Sprintf("failed to allocate requested HealthCheck NodePort %d: %v", r.Port, r.Err))
	}
	return field.Invalid(field.NewPath("spec", "clusterIPs"), svc.Spec.ClusterIPs,
		fmt.Sprintf("failed to allocate IP %v: %v", r.IP, r.Err))
}
