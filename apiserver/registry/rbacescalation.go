package registry

import (
	"context"
	"errors"

	rbacv1 "k8s.io/api/rbac/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	genericapirequest "k8s.io/apiserver/pkg/endpoints/request"
	genericregistry "k8s.io/apiserver/pkg/registry/generic/registry"
)

// RBACRules is what the escalation check asks of the RBAC authorizer's
// caches.
type RBACRules interface {
	// ConfirmNoEscalation returns an error naming the rules u does not
	// hold in namespace ("" for cluster-wide), nil when u holds them all.
	ConfirmNoEscalation(u user.Info, namespace string, rules []rbacv1.PolicyRule) error
	// RoleRefRules returns the rules of the role a binding in namespace
	// refers to.
	RoleRefRules(ref rbacv1.RoleRef, namespace string) ([]rbacv1.PolicyRule, error)
}

// Escalation refuses, as upstream's RBAC registry does, a write of a role
// that holds rules its writer does not hold (unless the writer may
// "escalate" roles), and a write of a binding to a role whose rules the
// writer does not hold (unless the writer may "bind" that role). A nil
// Escalation checks nothing.
type Escalation struct {
	Authorizer authorizer.Authorizer
	Rules      RBACRules
}

// fullAuthority is every permission; setting an aggregationRule, which can
// gather any rule, needs it.
var fullAuthority = []rbacv1.PolicyRule{
	{Verbs: []string{"*"}, APIGroups: []string{"*"}, Resources: []string{"*"}},
	{Verbs: []string{"*"}, NonResourceURLs: []string{"*"}},
}

func (e *Escalation) beginCreate() genericregistry.BeginCreateFunc {
	return func(ctx context.Context, obj runtime.Object, _ *metav1.CreateOptions) (genericregistry.FinishFunc, error) {
		return finishNothing, e.check(ctx, obj, nil)
	}
}

func (e *Escalation) beginUpdate() genericregistry.BeginUpdateFunc {
	return func(ctx context.Context, obj, old runtime.Object, _ *metav1.UpdateOptions) (genericregistry.FinishFunc, error) {
		if onlyGCFieldsChange(obj, old) {
			// The garbage collector must be able to remove owner
			// references and finalizers of roles it cannot grant.
			return finishNothing, nil
		}
		return finishNothing, e.check(ctx, obj, old)
	}
}

func finishNothing(context.Context, bool) {}

// check decides a create (old nil) or an update of a role or binding.
func (e *Escalation) check(ctx context.Context, obj, old runtime.Object) error {
	if e == nil || e.Authorizer == nil || e.Rules == nil {
		return nil
	}
	u, ok := genericapirequest.UserFrom(ctx)
	if !ok {
		return apierrors.NewForbidden(rbacResource(obj), objectMeta(obj).Name, errors.New("no user on the request"))
	}
	if privileged(u) {
		// system:masters may do anything; the loopback client is in it.
		return nil
	}
	ns := objectMeta(obj).Namespace
	if ns == "" {
		ns, _ = genericapirequest.NamespaceFrom(ctx)
	}
	switch o := obj.(type) {
	case *rbacv1.Role:
		return e.checkRole(ctx, u, obj, ns, o.Rules, false)
	case *rbacv1.ClusterRole:
		aggregated := o.AggregationRule != nil
		if oldRole, ok := old.(*rbacv1.ClusterRole); ok && oldRole.AggregationRule != nil {
			aggregated = true
		}
		return e.checkRole(ctx, u, obj, "", o.Rules, aggregated)
	case *rbacv1.RoleBinding:
		return e.checkBinding(ctx, u, obj, ns, o.RoleRef)
	case *rbacv1.ClusterRoleBinding:
		return e.checkBinding(ctx, u, obj, "", o.RoleRef)
	}
	return nil
}

func (e *Escalation) checkRole(ctx context.Context, u user.Info, obj runtime.Object, ns string, rules []rbacv1.PolicyRule, aggregated bool) error {
	gr, name := rbacResource(obj), objectMeta(obj).Name
	if e.allowed(ctx, u, "escalate", gr.Resource, ns, name) {
		return nil
	}
	if err := e.Rules.ConfirmNoEscalation(u, ns, rules); err != nil {
		return apierrors.NewForbidden(gr, name, err)
	}
	if aggregated && e.Rules.ConfirmNoEscalation(u, ns, fullAuthority) != nil {
		return apierrors.NewForbidden(gr, name, errors.New("must have cluster-admin privileges to use the aggregationRule"))
	}
	return nil
}

func (e *Escalation) checkBinding(ctx context.Context, u user.Info, obj runtime.Object, ns string, ref rbacv1.RoleRef) error {
	var resource string
	switch ref.Kind {
	case "Role":
		resource = "roles"
	case "ClusterRole":
		resource = "clusterroles"
	default:
		// Validation refuses the binding with a 422 that names the field.
		return nil
	}
	if ref.APIGroup != rbacv1.GroupName {
		return nil
	}
	// "bind" is checked in the binding's namespace, so that a RoleBinding
	// may be delegated per namespace, as upstream.
	if e.allowed(ctx, u, "bind", resource, ns, ref.Name) {
		return nil
	}
	rules, err := e.Rules.RoleRefRules(ref, ns)
	if err != nil {
		return err
	}
	if err := e.Rules.ConfirmNoEscalation(u, ns, rules); err != nil {
		return apierrors.NewForbidden(rbacResource(obj), objectMeta(obj).Name, err)
	}
	return nil
}

func (e *Escalation) allowed(ctx context.Context, u user.Info, verb, resource, ns, name string) bool {
	d, _, err := e.Authorizer.Authorize(ctx, authorizer.AttributesRecord{
		User: u, Verb: verb, APIGroup: rbacv1.GroupName, APIVersion: "*",
		Resource: resource, Namespace: ns, Name: name, ResourceRequest: true,
	})
	return err == nil && d == authorizer.DecisionAllow
}

func privileged(u user.Info) bool {
	for _, g := range u.GetGroups() {
		if g == user.SystemPrivilegedGroup {
			return true
		}
	}
	return false
}

func rbacResource(obj runtime.Object) schema.GroupResource {
	gr := schema.GroupResource{Group: rbacv1.GroupName}
	switch obj.(type) {
	case *rbacv1.Role:
		gr.Resource = "roles"
	case *rbacv1.ClusterRole:
		gr.Resource = "clusterroles"
	case *rbacv1.RoleBinding:
		gr.Resource = "rolebindings"
	case *rbacv1.ClusterRoleBinding:
		gr.Resource = "clusterrolebindings"
	}
	return gr
}

// onlyGCFieldsChange reports whether an update touches nothing but owner
// references and finalizers, which upstream lets through unchecked.
func onlyGCFieldsChange(obj, old runtime.Object) bool {
	o := old.DeepCopyObject()
	m, om := objectMeta(o), objectMeta(obj)
	m.OwnerReferences, m.Finalizers = om.OwnerReferences, om.Finalizers
	m.ResourceVersion, m.ManagedFields = om.ResourceVersion, om.ManagedFields
	return apiequality.Semantic.DeepEqual(o, obj)
}
