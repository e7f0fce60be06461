package registry

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
	genericregistry "k8s.io/apiserver/pkg/registry/generic/registry"
	"k8s.io/apiserver/pkg/storage"
	"k8s.io/klog/v2"

	"portal.dev/portal/allocator"
)

// allocate reserves what svc needs (see allocator.Allocate) and returns the
// FinishFunc that settles the reservations with the write's outcome.
//
// A failed write is not always one that did not happen: etcd answers a
// write it could not confirm (a leader lost mid-request, a request
// cancelled while its proposal was on its way to the leader) with an
// error, and may apply it afterwards. A read cannot rule that out: it sees
// what is committed when it runs, not a proposal still in flight. So a
// create whose outcome etcd left unknown gives nothing back; the repair
// loop frees its reservations once it has seen them held by no Service on
// two passes far enough apart, as upstream's repair frees a leak only
// after several passes. A write known not to have happened (the name was
// taken, validation refused it) gives back what it reserved, but what the
// stored Service holds stays reserved, and when the stored Service cannot
// be read nothing is given back. Released on a write that landed, a node
// port would go to a second Service.
//
// The generic store reports an update's success before it writes it, so
// what an update drops (a node port, when a NodePort Service becomes a
// ClusterIP one) is given back only after an update is stored (see
// storedServices.afterUpdate), not on that report.
func allocate(ctx context.Context, cfg Config, writes serviceWrites, svc, old *corev1.Service, dryRun bool) (genericregistry.FinishFunc, error) {
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
		switch {
		case success && old != nil && writes != nil && !dryRun:
			// The generic store settles an update before writing it:
			// what the update drops goes back once it is stored.
			writes.releaseWhenStored(svc, op.Dropped())
			return
		case success || writes == nil:
			op.Finish(ctx, success)
			return
		}
		if writes.unknownOutcome(svc) {
			klog.InfoS("Service write of unknown outcome; its reservations are left to repair",
				"service", svc.Namespace+"/"+svc.Name, "reserved", op.Reserved())
			return
		}
		current, err := writes.get(ctx, svc.Namespace, svc.Name)
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

// serviceWrites is what a Service write's FinishFunc needs of the
// Services' store: how a failed create ended, and what is stored.
type serviceWrites interface {
	// get returns the stored Service ns/name, nil when there is none.
	get(ctx context.Context, ns, name string) (*corev1.Service, error)
	// unknownOutcome says whether etcd answered the create of svc with an
	// error that leaves open whether it was applied, and forgets it.
	unknownOutcome(svc *corev1.Service) bool
	// releaseWhenStored gives back keys that an update of svc drops once
	// an update of svc is stored, those the stored Service does not hold.
	releaseWhenStored(svc *corev1.Service, keys []allocator.Key)
}

// storedServices reads Services from etcd, past the watch cache, and
// notes which creates ended with an outcome etcd left unknown: the
// Services' own storage, given as it is made.
type storedServices struct {
	storage storage.Interface
	key     func(runtime.Object) (string, error)

	mu      sync.Mutex
	unknown map[runtime.Object]bool
	// dropped holds, per owner, what updates dropped that no stored
	// update has given back yet.
	dropped map[string][]allocator.Key
}

// wrap takes the Services' storage to read from, and puts outcomeStorage
// in front of it, below the dry-run switch, so that every create that
// reaches etcd is seen with the very object BeginCreate was given.
func (s *storedServices) wrap(st storage.Interface, key func(runtime.Object) (string, error)) storage.Interface {
	s.storage, s.key = st, key
	return outcomeStorage{Interface: st, unknown: s.noteUnknown}
}

func (s *storedServices) noteUnknown(obj runtime.Object) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.unknown == nil {
		s.unknown = map[runtime.Object]bool{}
	}
	s.unknown[obj] = true
}

func (s *storedServices) unknownOutcome(svc *corev1.Service) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	unknown := s.unknown[svc]
	delete(s.unknown, svc)
	return unknown
}

func (s *storedServices) releaseWhenStored(svc *corev1.Service, keys []allocator.Key) {
	if len(keys) == 0 {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.dropped == nil {
		s.dropped = map[string][]allocator.Key{}
	}
	owner := allocator.Owner(svc)
	s.dropped[owner] = append(s.dropped[owner], keys...)
}

// afterUpdate gives back what updates of a Service dropped, now that one
// is stored: the keys the stored Service does not hold. An update that
// failed leaves its keys here for the next stored one, or for repair.
func (s *storedServices) afterUpdate(cfg Config) genericregistry.AfterUpdateFunc {
	return func(obj runtime.Object, opts *metav1.UpdateOptions) {
		if cfg.Allocator == nil || (opts != nil && len(opts.DryRun) > 0) {
			return
		}
		svc := obj.(*corev1.Service)
		s.mu.Lock()
		keys := s.dropped[allocator.Owner(svc)]
		delete(s.dropped, allocator.Owner(svc))
		s.mu.Unlock()
		cfg.Allocator.ReleaseUnheld(context.Background(), svc, keys)
	}
}

// get returns the stored Service ns/name, or nil when there is none.
func (s *storedServices) get(ctx context.Context, ns, name string) (*corev1.Service, error) {
	if s.storage == nil {
		return nil, errors.New("the Services' storage is not made")
	}
	key, err := s.key(&corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}})
	if err != nil {
		return nil, err
	}
	// The request may be over already; the read still gets its own time.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), storedReadTimeout)
	defer cancel()
	out := &corev1.Service{}
	err = s.storage.Get(ctx, key, storage.GetOptions{}, out)
	switch {
	case storage.IsNotFound(err):
		return nil, nil
	case err != nil:
		return nil, err
	}
	return out, nil
}

// outcomeStorage reports the objects whose create failed with an outcome
// etcd left unknown. Every other call goes straight through.
type outcomeStorage struct {
	storage.Interface
	unknown func(obj runtime.Object)
}

// Create implements storage.Interface.
func (o outcomeStorage) Create(ctx context.Context, key string, obj, out runtime.Object, ttl uint64) error {
	err := o.Interface.Create(ctx, key, obj, out, ttl)
	if err != nil && !notApplied(err) {
		o.unknown(obj)
	}
	return err
}

// notApplied says a failed write is known not to have been applied: etcd
// refused its compare (the key exists, or changed) or the storage refused
// the object before sending it. Any other failure (a timeout, a lost
// leader, a cancelled request, an unreachable member) may still be
// applied: the proposal can be in raft, on its way to the leader or in
// its log, when the error is returned.
func notApplied(err error) bool {
	var status apierrors.APIStatus
	return storage.IsExist(err) || storage.IsConflict(err) || storage.IsNotFound(err) ||
		storage.IsInvalidObj(err) || errors.As(err, &status)
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
