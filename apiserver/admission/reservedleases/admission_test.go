package reservedleases

import (
	"context"
	"strings"
	"testing"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apiserver/pkg/admission"
	"k8s.io/apiserver/pkg/authentication/user"

	"portal.dev/portal/apiserver/auth/rbac/policy"
)

func lease(ns, name string, labels map[string]string) *coordinationv1.Lease {
	return &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: labels}}
}

func TestValidate(t *testing.T) {
	peer := map[string]string{PeerLeaseLabel: ""}
	ingress := &user.DefaultInfo{Name: policy.IngressUser}
	dns := &user.DefaultInfo{Name: policy.DNSUser}
	apiserver := &user.DefaultInfo{Name: user.APIServerUser, Groups: []string{user.SystemPrivilegedGroup}}
	cm := &user.DefaultInfo{Name: policy.ControllerManagerUser}
	tests := []struct {
		name     string
		op       admission.Operation
		obj, old *coordinationv1.Lease
		user     user.Info
		wantErr  string
	}{
		{"ingress forges a peer lease", admission.Create, lease("kube-system", "x", peer), nil, ingress, "only the API servers"},
		{"dns labels its lease as a peer", admission.Update, lease("kube-system", "kube-dns-a", peer), lease("kube-system", "kube-dns-a", nil), dns, "only the API servers"},
		{"dns rewrites a peer lease", admission.Update, lease("kube-system", "portal-apiserver-1", nil), lease("kube-system", "portal-apiserver-1", peer), dns, "only the API servers"},
		{"dns deletes a peer lease", admission.Delete, nil, lease("kube-system", "portal-apiserver-1", peer), dns, "only the API servers"},
		{"ingress takes the controller manager lease", admission.Update, lease("kube-system", ControllerManagerLease, nil), lease("kube-system", ControllerManagerLease, nil), ingress, "only system:kube-controller-manager"},
		{"dns creates the controller manager lease", admission.Create, lease("kube-system", ControllerManagerLease, nil), nil, dns, "only system:kube-controller-manager"},
		{"api server writes its lease", admission.Update, lease("kube-system", "portal-apiserver-1", peer), lease("kube-system", "portal-apiserver-1", peer), apiserver, ""},
		{"controller manager renews", admission.Update, lease("kube-system", ControllerManagerLease, nil), lease("kube-system", ControllerManagerLease, nil), cm, ""},
		{"controller manager may not forge a peer", admission.Create, lease("kube-system", "y", peer), nil, cm, "only the API servers"},
		{"dns writes its own lease", admission.Create, lease("kube-system", "kube-dns-a", nil), nil, dns, ""},
		{"another namespace", admission.Create, lease("team", ControllerManagerLease, peer), nil, ingress, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var obj, old runtime.Object
			name := ""
			if tt.obj != nil {
				obj, name = tt.obj, tt.obj.Name
			}
			if tt.old != nil {
				old, name = tt.old, tt.old.Name
			}
			ns := "kube-system"
			if tt.obj != nil {
				ns = tt.obj.Namespace
			}
			a := admission.NewAttributesRecord(obj, old, coordinationv1.SchemeGroupVersion.WithKind("Lease"), ns, name,
				coordinationv1.SchemeGroupVersion.WithResource("leases"), "", tt.op, nil, false, tt.user)
			err := New().Validate(context.Background(), a, nil)
			if tt.wantErr == "" {
				if err != nil {
					t.Fatalf("Validate: %v, want admitted", err)
				}
				return
			}
			if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("Validate: %v, want Forbidden saying %q", err, tt.wantErr)
			}
		})
	}
}
