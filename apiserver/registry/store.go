package registry

import (
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/registry/generic"
	genericregistry "k8s.io/apiserver/pkg/registry/generic/registry"
	"k8s.io/apiserver/pkg/registry/rest"
	"k8s.io/apiserver/pkg/storage"
	"k8s.io/apiserver/pkg/storage/storagebackend"
	"k8s.io/apiserver/pkg/storage/storagebackend/factory"
	"k8s.io/client-go/tools/cache"
	"sigs.k8s.io/structured-merge-diff/v6/fieldpath"

	"portal.dev/portal/apiserver/printers"
	"portal.dev/portal/apiserver/scheme"
)

// Kind describes one served resource.
type Kind struct {
	GroupVersion schema.GroupVersion
	Resource     string // plural, lower case: "services"
	Singular     string
	ShortNames   []string
	Categories   []string
	Namespaced   bool
	// HasStatus adds the status subresource; the main resource then keeps
	// the stored status on update and clears it on create.
	HasStatus bool
	// HasScale adds the scale subresource (see ScaleREST).
	HasScale bool
	New      func() runtime.Object
	NewList  func() runtime.Object
	Hooks    Hooks
	// KeepStatusOnCreate lets a create set status (nodes register with it).
	KeepStatusOnCreate bool
	// Delete, when set, is the graceful-deletion policy of the kind.
	Delete rest.RESTDeleteStrategy
	// BeginCreate and BeginUpdate run before the strategy, in the request;
	// AfterUpdate and AfterDelete once the write is stored.
	BeginCreate genericregistry.BeginCreateFunc
	BeginUpdate genericregistry.BeginUpdateFunc
	AfterUpdate genericregistry.AfterUpdateFunc
	AfterDelete genericregistry.AfterDeleteFunc
	// ShouldDeleteDuringUpdate, when set, replaces the generic store's
	// rule that an update leaving an object terminating, with a zero
	// grace period and no finalizers, deletes it.
	ShouldDeleteDuringUpdate func(ctx context.Context, key string, obj, existing runtime.Object) bool
	// WrapStorage, when set, is given the kind's storage (below the
	// dry-run switch) as it is made, with the function that names an
	// object's key in it, and returns the storage the store is to use.
	// It runs before the store starts the goroutines that read its
	// storage, so the store never sees the storage change.
	WrapStorage func(st storage.Interface, key func(runtime.Object) (string, error)) storage.Interface
}

// REST is the storage of one resource; it adds short names and categories to
// the generic store, which kubectl reads from discovery.
type REST struct {
	*genericregistry.Store
	shortNames []string
	categories []string
}

// ShortNames lets kubectl use e.g. "svc" for services.
func (r *REST) ShortNames() []string { return r.shortNames }

// Categories puts the resource into groups such as "all".
func (r *REST) Categories() []string { return r.categories }

// StatusREST serves the status subresource.
type StatusREST struct {
	store *genericregistry.Store
}

// New returns an empty object of the kind.
func (r *StatusREST) New() runtime.Object { return r.store.New() }

// Destroy is a no-op: the main resource owns the storage.
func (r *StatusREST) Destroy() {}

// Get returns the object, as upstream's status subresource does.
func (r *StatusREST) Get(ctx context.Context, name string, options *metav1.GetOptions) (runtime.Object, error) {
	return r.store.Get(ctx, name, options)
}

// Update writes only status.
func (r *StatusREST) Update(ctx context.Context, name string, objInfo rest.UpdatedObjectInfo, createValidation rest.ValidateObjectFunc, updateValidation rest.ValidateObjectUpdateFunc, forceAllowCreate bool, options *metav1.UpdateOptions) (runtime.Object, bool, error) {
	// Status updates never create: upstream passes false here too.
	return r.store.Update(ctx, name, clientApplyErrors{objInfo}, createValidation, updateValidation, false, options)
}

// GetResetFields returns what the status subresource never writes.
func (r *StatusREST) GetResetFields() map[fieldpath.APIVersion]*fieldpath.Set {
	return r.store.GetResetFields()
}

// ConvertToTable prints the object as the main resource does.
func (r *StatusREST) ConvertToTable(ctx context.Context, object runtime.Object, tableOptions runtime.Object) (*metav1.Table, error) {
	return r.store.ConvertToTable(ctx, object, tableOptions)
}

// NewStore builds the generic store of k on the given storage.
func NewStore(k Kind, opts generic.RESTOptionsGetter) (*REST, *StatusREST, error) {
	st := newStrategy(k)
	gr := schema.GroupResource{Group: k.GroupVersion.Group, Resource: k.Resource}
	store := &genericregistry.Store{
		NewFunc:                   k.New,
		NewListFunc:               k.NewList,
		DefaultQualifiedResource:  gr,
		SingularQualifiedResource: schema.GroupResource{Group: gr.Group, Resource: k.Singular},
		PredicateFunc:             predicate(k.Namespaced),
		CreateStrategy:            st,
		UpdateStrategy:            st,
		DeleteStrategy:            st,
		ResetFieldsStrategy:       st,
		TableConvertor:            printers.TableConvertor(gr),
	}
	if k.Delete != nil {
		store.DeleteStrategy = k.Delete
	}
	store.BeginCreate, store.BeginUpdate, store.AfterDelete = k.BeginCreate, k.BeginUpdate, k.AfterDelete
	store.AfterUpdate = k.AfterUpdate
	store.ShouldDeleteDuringUpdate = k.ShouldDeleteDuringUpdate
	if k.WrapStorage != nil {
		opts = wrappedStorage{RESTOptionsGetter: opts, wrap: k.WrapStorage}
	}
	err := store.CompleteWithOptions(&generic.StoreOptions{
		RESTOptions: opts,
		AttrFunc:    attrs(k.Namespaced),
	})
	if err != nil {
		return nil, nil, fmt.Errorf("storage for %s: %w", gr, err)
	}
	r := &REST{Store: store, shortNames: k.ShortNames, categories: k.Categories}
	if !k.HasStatus {
		return r, nil, nil
	}
	statusStore := *store
	// Status writes keep the stored spec, so the spec hooks (a Service's
	// IP families and allocation) have nothing to do there.
	statusStore.BeginCreate, statusStore.BeginUpdate = nil, nil
	ss := statusStrategy{st}
	statusStore.UpdateStrategy = ss
	statusStore.ResetFieldsStrategy = ss
	return r, &StatusREST{store: &statusStore}, nil
}

// wrappedStorage gives the storage its getter makes to wrap first.
type wrappedStorage struct {
	generic.RESTOptionsGetter
	wrap func(storage.Interface, func(runtime.Object) (string, error)) storage.Interface
}

// GetRESTOptions implements generic.RESTOptionsGetter.
func (w wrappedStorage) GetRESTOptions(resource schema.GroupResource, example runtime.Object) (generic.RESTOptions, error) {
	opts, err := w.RESTOptionsGetter.GetRESTOptions(resource, example)
	if err != nil {
		return opts, err
	}
	decorate := opts.Decorator
	if decorate == nil {
		decorate = generic.UndecoratedStorage
	}
	opts.Decorator = func(config *storagebackend.ConfigForResource, prefix string, keyFunc func(runtime.Object) (string, error),
		newFunc, newListFunc func() runtime.Object, attrs storage.AttrFunc, trigger storage.IndexerFuncs, indexers *cache.Indexers) (storage.Interface, factory.DestroyFunc, error) {
		s, destroy, err := decorate(config, prefix, keyFunc, newFunc, newListFunc, attrs, trigger, indexers)
		if err != nil {
			return s, destroy, err
		}
		return w.wrap(s, keyFunc), destroy, nil
	}
	return opts, nil
}

func predicate(namespaced bool) func(labels.Selector, fields.Selector) storage.SelectionPredicate {
	return func(l labels.Selector, f fields.Selector) storage.SelectionPredicate {
		return storage.SelectionPredicate{Label: l, Field: f, GetAttrs: attrs(namespaced)}
	}
}

func attrs(namespaced bool) storage.AttrFunc {
	return func(obj runtime.Object) (labels.Set, fields.Set, error) {
		m, err := meta.Accessor(obj)
		if err != nil {
			return nil, nil, err
		}
		return labels.Set(m.GetLabels()), scheme.SelectableFields(obj, m.GetName(), m.GetNamespace(), namespaced), nil
	}
}
