package validation

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestValidateObjectMetaFor(t *testing.T) {
	cases := []struct {
		name       string
		kind       string
		meta       metav1.ObjectMeta
		namespaced bool
		want       []wantErr
	}{
		{name: "Service DNS-1035 label", kind: "Service", meta: metav1.ObjectMeta{Name: "web-1", Namespace: "ns"}, namespaced: true},
		{name: "Service starting with digit", kind: "Service", meta: metav1.ObjectMeta{Name: "1web", Namespace: "ns"}, namespaced: true,
			want: []wantErr{e("metadata.name", tInvalid, "a DNS-1035 label")}},
		{name: "Service with dot", kind: "Service", meta: metav1.ObjectMeta{Name: "web.v1", Namespace: "ns"}, namespaced: true,
			want: []wantErr{e("metadata.name", tInvalid, "a DNS-1035 label")}},
		{name: "Namespace label", kind: "Namespace", meta: metav1.ObjectMeta{Name: "team-a"}},
		{name: "Namespace with dot", kind: "Namespace", meta: metav1.ObjectMeta{Name: "team.a"},
			want: []wantErr{e("metadata.name", tInvalid, "must not contain dots")}},
		{name: "Namespace may not have a namespace", kind: "Namespace", meta: metav1.ObjectMeta{Name: "a", Namespace: "b"},
			want: []wantErr{e("metadata.namespace", tForbidden, "not allowed on this type")}},
		{name: "Pod subdomain", kind: "Pod", meta: metav1.ObjectMeta{Name: "web.v1", Namespace: "ns"}, namespaced: true},
		{name: "Pod uppercase", kind: "Pod", meta: metav1.ObjectMeta{Name: "Web", Namespace: "ns"}, namespaced: true,
			want: []wantErr{e("metadata.name", tInvalid, "RFC 1123 subdomain")}},
		{name: "ConfigMap subdomain", kind: "ConfigMap", meta: metav1.ObjectMeta{Name: "kube-root-ca.crt", Namespace: "ns"}, namespaced: true},
		{name: "Secret underscore", kind: "Secret", meta: metav1.ObjectMeta{Name: "my_secret", Namespace: "ns"}, namespaced: true,
			want: []wantErr{e("metadata.name", tInvalid, "RFC 1123 subdomain")}},
		{name: "Endpoints subdomain", kind: "Endpoints", meta: metav1.ObjectMeta{Name: "web.v1", Namespace: "ns"}, namespaced: true},
		{name: "EndpointSlice subdomain", kind: "EndpointSlice", meta: metav1.ObjectMeta{Name: "web-abc12", Namespace: "ns"}, namespaced: true},
		{name: "Lease subdomain", kind: "Lease", meta: metav1.ObjectMeta{Name: "node.example", Namespace: "kube-node-lease"}, namespaced: true},
		{name: "Lease finalizer need not be standard", kind: "Lease", meta: metav1.ObjectMeta{Name: "l", Namespace: "ns", Finalizers: []string{"mine"}}, namespaced: true},
		{name: "Ingress subdomain", kind: "Ingress", meta: metav1.ObjectMeta{Name: "web.ingress", Namespace: "ns"}, namespaced: true},
		{name: "IngressClass cluster-scoped", kind: "IngressClass", meta: metav1.ObjectMeta{Name: "nginx"}},
		{name: "Event subdomain", kind: "Event", meta: metav1.ObjectMeta{Name: "web.17a2b3c4d5e6f", Namespace: "ns"}, namespaced: true},
		{name: "ServiceAccount subdomain", kind: "ServiceAccount", meta: metav1.ObjectMeta{Name: "builder.bot", Namespace: "ns"}, namespaced: true},
		{name: "Node subdomain", kind: "Node", meta: metav1.ObjectMeta{Name: "node-1.example.com"}},
		{name: "Node needs no namespace", kind: "Node", meta: metav1.ObjectMeta{Name: "node-1", Namespace: "ns"},
			want: []wantErr{e("metadata.namespace", tForbidden)}},
		{name: "name required", kind: "Pod", meta: metav1.ObjectMeta{Namespace: "ns"}, namespaced: true,
			want: []wantErr{e("metadata.name", tRequired, "name or generateName is required")}},
		{name: "generateName checked as prefix", kind: "Pod", meta: metav1.ObjectMeta{GenerateName: "web-", Name: "web-x7k2q", Namespace: "ns"}, namespaced: true},
		{name: "bad generateName", kind: "Pod", meta: metav1.ObjectMeta{GenerateName: "Web-", Name: "web-x7k2q", Namespace: "ns"}, namespaced: true,
			want: []wantErr{e("metadata.generateName", tInvalid)}},
		{name: "namespace invalid", kind: "Pod", meta: metav1.ObjectMeta{Name: "p", Namespace: "Ns"}, namespaced: true,
			want: []wantErr{e("metadata.namespace", tInvalid)}},
		{name: "label invalid", kind: "Pod", meta: metav1.ObjectMeta{Name: "p", Namespace: "ns", Labels: map[string]string{"a": "b c"}}, namespaced: true,
			want: []wantErr{e("metadata.labels", tInvalid)}},
		{name: "standard finalizer", kind: "Pod", meta: metav1.ObjectMeta{Name: "p", Namespace: "ns", Finalizers: []string{"foregroundDeletion", "example.com/x"}}, namespaced: true},
		{name: "unprefixed finalizer", kind: "Pod", meta: metav1.ObjectMeta{Name: "p", Namespace: "ns", Finalizers: []string{"mine"}}, namespaced: true,
			want: []wantErr{e("metadata.finalizers[0]", tInvalid, "name is neither a standard finalizer name nor is it fully qualified")}},
		{name: "unknown kind uses subdomain rule", kind: "Widget", meta: metav1.ObjectMeta{Name: "a.b", Namespace: "ns"}, namespaced: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			checkErrs(t, ValidateObjectMetaFor(tc.kind, &tc.meta, tc.namespaced), tc.want...)
		})
	}
}

func TestValidateObjectMetaUpdateFor(t *testing.T) {
	old := metav1.ObjectMeta{Name: "p", Namespace: "ns", UID: "u1", ResourceVersion: "5", Generation: 3}
	now := metav1.Now()
	cases := []struct {
		name string
		old  metav1.ObjectMeta
		edit func(*metav1.ObjectMeta)
		want []wantErr
	}{
		{name: "labels may change", old: old, edit: func(m *metav1.ObjectMeta) { m.Labels = map[string]string{"a": "b"} }},
		{name: "name immutable", old: old, edit: func(m *metav1.ObjectMeta) { m.Name = "q" },
			want: []wantErr{e("metadata.name", tInvalid, "field is immutable")}},
		{name: "namespace immutable", old: old, edit: func(m *metav1.ObjectMeta) { m.Namespace = "other" },
			want: []wantErr{e("metadata.namespace", tInvalid, "field is immutable")}},
		{name: "uid immutable", old: old, edit: func(m *metav1.ObjectMeta) { m.UID = "u2" },
			want: []wantErr{e("metadata.uid", tInvalid, "field is immutable")}},
		{name: "resourceVersion required", old: old, edit: func(m *metav1.ObjectMeta) { m.ResourceVersion = "" },
			want: []wantErr{e("metadata.resourceVersion", tInvalid, "must be specified for an update")}},
		{name: "generation may not decrease", old: old, edit: func(m *metav1.ObjectMeta) { m.Generation = 2 },
			want: []wantErr{e("metadata.generation", tInvalid, "must not be decremented")}},
		{name: "no new finalizers while deleting", old: func() metav1.ObjectMeta { m := old; m.DeletionTimestamp = &now; return m }(),
			edit: func(m *metav1.ObjectMeta) { m.Finalizers = []string{"example.com/x"} },
			want: []wantErr{e("metadata.finalizers", tForbidden, "no new finalizers can be added if the object is being deleted")}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			n := *tc.old.DeepCopy()
			tc.edit(&n)
			checkErrs(t, ValidateObjectMetaUpdateFor("Pod", &n, &tc.old), tc.want...)
		})
	}
}
