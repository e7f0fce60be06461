package rbac

import (
	"slices"

	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apiserver/pkg/authentication/serviceaccount"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/client-go/tools/cache"
)

// SubjectIndex names the index of ClusterRoleBindings by the subjects
// they name (see IndexBySubject). With it a decision looks only at the
// bindings of the user and its groups instead of walking every binding.
const SubjectIndex = "subject"

// IndexBySubject is the index function of SubjectIndex: one key per
// subject of a ClusterRoleBinding, as subjectKeys makes them for users.
func IndexBySubject(obj any) ([]string, error) {
	b, ok := obj.(*rbacv1.ClusterRoleBinding)
	if !ok {
		return nil, nil
	}
	keys := make([]string, 0, len(b.Subjects))
	for _, s := range b.Subjects {
		switch s.Kind {
		case rbacv1.UserKind, rbacv1.GroupKind:
			keys = append(keys, s.Kind+"/"+s.Name)
		case rbacv1.ServiceAccountKind:
			if s.Namespace != "" {
				// A cluster-wide binding names the namespace; the user
				// is system:serviceaccount:NS:NAME.
				keys = append(keys, rbacv1.UserKind+"/"+serviceaccount.MakeUsername(s.Namespace, s.Name))
			}
		}
	}
	return keys, nil
}

// subjectKeys are the SubjectIndex keys that may name u.
func subjectKeys(u user.Info) []string {
	keys := []string{rbacv1.UserKind + "/" + u.GetName()}
	for _, g := range u.GetGroups() {
		keys = append(keys, rbacv1.GroupKind+"/"+g)
	}
	return keys
}

// clusterBindingsFor returns the ClusterRoleBindings that may apply to u:
// from the subject index when there is one, else all of them.
func (r *Resolver) clusterBindingsFor(u user.Info) ([]*rbacv1.ClusterRoleBinding, error) {
	if r.l.ClusterRoleBindingIndex == nil {
		return r.l.ClusterRoleBindings.List(labels.Everything())
	}
	var out []*rbacv1.ClusterRoleBinding
	for _, k := range subjectKeys(u) {
		objs, err := r.l.ClusterRoleBindingIndex.ByIndex(SubjectIndex, k)
		if err != nil {
			return out, err
		}
		for _, o := range objs {
			b := o.(*rbacv1.ClusterRoleBinding)
			// A binding naming both the user and one of its groups is
			// visited once; a user has few bindings, so a scan will do.
			if !slices.Contains(out, b) {
				out = append(out, b)
			}
		}
	}
	return out, nil
}

var _ cache.IndexFunc = IndexBySubject
