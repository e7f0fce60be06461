// Package registry turns the served kinds into REST storage: one
// genericregistry.Store per resource, with the strategy that defaults,
// validates and protects status, plus the subresources (status, finalize,
// binding) and the namespace deletion semantics. It owns what happens inside
// a request; controllers and bootstrap loops live elsewhere.
package registry

import (
	"context"
	"reflect"

	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/apiserver/pkg/registry/rest"
	"k8s.io/apiserver/pkg/storage/names"
	"sigs.k8s.io/structured-merge-diff/v6/fieldpath"

	"portal.dev/portal/apiserver/scheme"
)

// Hooks are the kind-specific parts of a strategy. Nil hooks do nothing.
type Hooks struct {
	// PrepareForCreate clears or sets what a client may not choose on create.
	PrepareForCreate func(obj runtime.Object)
	// PrepareForUpdate runs after status (or spec) is carried over from old.
	PrepareForUpdate func(obj, old runtime.Object)
	Validate         func(obj runtime.Object) field.ErrorList
	ValidateUpdate   func(obj, old runtime.Object) field.ErrorList
	// ValidateStatusUpdate checks an update through the status subresource.
	ValidateStatusUpdate func(obj, old runtime.Object) field.ErrorList
	// PrepareForStatusUpdate runs after the status subresource has carried
	// spec and the protected metadata over from old.
	PrepareForStatusUpdate func(obj, old runtime.Object)
	// Warnings returns warnings for a create or update (old is nil on create).
	Warnings func(obj, old runtime.Object) []string
}

// strategy is the create/update/delete strategy of the main resource.
type strategy struct {
	runtime.ObjectTyper
	names.NameGenerator
	apiVersion string
	namespaced bool
	hasStatus  bool
	keepStatus bool
	hooks      Hooks
}

func newStrategy(k Kind) *strategy {
	return &strategy{
		ObjectTyper:   scheme.Scheme,
		NameGenerator: names.SimpleNameGenerator,
		apiVersion:    k.GroupVersion.String(),
		namespaced:    k.Namespaced,
		hasStatus:     k.HasStatus,
		keepStatus:    k.KeepStatusOnCreate,
		hooks:         k.Hooks,
	}
}

func (s *strategy) NamespaceScoped() bool { return s.namespaced }

func (s *strategy) PrepareForCreate(ctx context.Context, obj runtime.Object) {
	if s.hasStatus {
		if !s.keepStatus {
			clearField(obj, "Status")
		}
		if m, err := meta.Accessor(obj); err == nil {
			m.SetGeneration(1)
		}
	}
	if s.hooks.PrepareForCreate != nil {
		s.hooks.PrepareForCreate(obj)
	}
}

func (s *strategy) PrepareForUpdate(ctx context.Context, obj, old runtime.Object) {
	if s.hasStatus {
		copyField(obj, old, "Status")
		bumpGenerationOnSpecChange(obj, old)
	}
	if s.hooks.PrepareForUpdate != nil {
		s.hooks.PrepareForUpdate(obj, old)
	}
}

func (s *strategy) Validate(ctx context.Context, obj runtime.Object) field.ErrorList {
	if s.hooks.Validate == nil {
		return nil
	}
	return s.hooks.Validate(obj)
}

func (s *strategy) ValidateUpdate(ctx context.Context, obj, old runtime.Object) field.ErrorList {
	if s.hooks.ValidateUpdate == nil {
		return nil
	}
	return s.hooks.ValidateUpdate(obj, old)
}

func (s *strategy) WarningsOnCreate(ctx context.Context, obj runtime.Object) []string {
	if s.hooks.Warnings == nil {
		return nil
	}
	return s.hooks.Warnings(obj, nil)
}

func (s *strategy) WarningsOnUpdate(ctx context.Context, obj, old runtime.Object) []string {
	if s.hooks.Warnings == nil {
		return nil
	}
	return s.hooks.Warnings(obj, old)
}

func (s *strategy) Canonicalize(obj runtime.Object)                   {}
func (s *strategy) AllowCreateOnUpdate(ctx context.Context) bool      { return false }
func (s *strategy) AllowUnconditionalUpdate(ctx context.Context) bool { return true }

// GetResetFields tells server-side apply that the main resource never sets
// status, so applying through it takes no ownership of status fields.
func (s *strategy) GetResetFields() map[fieldpath.APIVersion]*fieldpath.Set {
	if !s.hasStatus {
		return nil
	}
	return map[fieldpath.APIVersion]*fieldpath.Set{
		fieldpath.APIVersion(s.apiVersion): fieldpath.NewSet(fieldpath.MakePathOrDie("status")),
	}
}

// statusStrategy is the strategy of the status subresource: only status
// (and nothing in metadata but labels, annotations and the like) changes.
type statusStrategy struct {
	*strategy
}

func (s statusStrategy) PrepareForUpdate(ctx context.Context, obj, old runtime.Object) {
	copyField(obj, old, "Spec")
	newMeta, err1 := meta.Accessor(obj)
	oldMeta, err2 := meta.Accessor(old)
	if err1 == nil && err2 == nil {
		// A status writer must not change ownership, finalizers or the
		// deletion state; upstream resets the same fields.
		newMeta.SetDeletionTimestamp(oldMeta.GetDeletionTimestamp())
		newMeta.SetGeneration(oldMeta.GetGeneration())
		newMeta.SetOwnerReferences(oldMeta.GetOwnerReferences())
		newMeta.SetFinalizers(oldMeta.GetFinalizers())
		newMeta.SetManagedFields(oldMeta.GetManagedFields())
	}
	if s.hooks.PrepareForStatusUpdate != nil {
		s.hooks.PrepareForStatusUpdate(obj, old)
	}
}

func (s statusStrategy) ValidateUpdate(ctx context.Context, obj, old runtime.Object) field.ErrorList {
	if s.hooks.ValidateStatusUpdate == nil {
		return nil
	}
	return s.hooks.ValidateStatusUpdate(obj, old)
}

func (s statusStrategy) WarningsOnUpdate(ctx context.Context, obj, old runtime.Object) []string {
	return nil
}

func (s statusStrategy) GetResetFields() map[fieldpath.APIVersion]*fieldpath.Set {
	return map[fieldpath.APIVersion]*fieldpath.Set{
		fieldpath.APIVersion(s.apiVersion): fieldpath.NewSet(
			fieldpath.MakePathOrDie("spec"),
			fieldpath.MakePathOrDie("metadata", "deletionTimestamp"),
			fieldpath.MakePathOrDie("metadata", "ownerReferences"),
			fieldpath.MakePathOrDie("metadata", "finalizers"),
		),
	}
}

func bumpGenerationOnSpecChange(obj, old runtime.Object) {
	newMeta, err1 := meta.Accessor(obj)
	oldMeta, err2 := meta.Accessor(old)
	if err1 != nil || err2 != nil {
		return
	}
	if !apiequality.Semantic.DeepEqual(fieldOf(obj, "Spec"), fieldOf(old, "Spec")) {
		newMeta.SetGeneration(oldMeta.GetGeneration() + 1)
	}
}

// The served types all keep their spec and status in fields named Spec and
// Status; reflection lets one strategy protect them for every kind.
func fieldOf(obj runtime.Object, name string) any {
	v := reflect.ValueOf(obj).Elem().FieldByName(name)
	if !v.IsValid() {
		return nil
	}
	return v.Interface()
}

func copyField(dst, src runtime.Object, name string) {
	d := reflect.ValueOf(dst).Elem().FieldByName(name)
	s := reflect.ValueOf(src).Elem().FieldByName(name)
	if d.IsValid() && s.IsValid() && d.CanSet() {
		d.Set(s)
	}
}

func clearField(obj runtime.Object, name string) {
	v := reflect.ValueOf(obj).Elem().FieldByName(name)
	if v.IsValid() && v.CanSet() {
		v.Set(reflect.Zero(v.Type()))
	}
}

var _ rest.RESTCreateStrategy = &strategy{}
var _ rest.RESTUpdateStrategy = &strategy{}
var _ rest.ResetFieldsStrategy = &strategy{}
var _ rest.RESTUpdateStrategy = statusStrategy{}
