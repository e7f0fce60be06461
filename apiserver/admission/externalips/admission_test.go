package externalips

import (
	"context"
	"errors"
	"net/netip"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apiserver/pkg/admission"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/authorization/authorizer"
)

// grantTo allows create services/externalips to the named user only, and
// records what it was asked.
type grantTo struct {
	user  string
	asked []authorizer.Attributes
}

func (g *grantTo) Authorize(_ context.Context, a authorizer.Attributes) (authorizer.Decision, string, error) {
	g.asked = append(g.asked, a)
	if a.GetUser().GetName() == g.user && a.GetVerb() == "create" && a.GetResource() == "services" &&
		a.GetSubresource() == "externalips" && a.GetAPIGroup() == "" {
		return authorizer.DecisionAllow, "", nil
	}
	return authorizer.DecisionNoOpinion, "", nil
}

func service(ips ...string) *corev1.Service {
	return &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "a"},
		Spec: corev1.ServiceSpec{ExternalIPs: ips}}
}

func TestValidate(t *testing.T) {
	tests := []struct {
		name        string
		cidrs       []string
		user        string
		op          admission.Operation
		subresource string
		old, obj    *corev1.Service
		// wantFields are the spec.externalIPs[i] the refusal names; none
		// means admitted.
		wantFields []string
	}{
		{name: "no external IPs", user: "tenant", op: admission.Create, obj: service()},
		{name: "create refused without permission or CIDRs", user: "tenant", op: admission.Create,
			obj: service("203.0.113.7"), wantFields: []string{"spec.externalIPs[0]"}},
		{name: "create allowed with permission", user: "admin", op: admission.Create, obj: service("203.0.113.7")},
		{name: "create allowed inside a CIDR", cidrs: []string{"203.0.113.0/24"}, user: "tenant", op: admission.Create,
			obj: service("203.0.113.7")},
		{name: "only the address outside the CIDRs is named", cidrs: []string{"203.0.113.0/24"}, user: "tenant",
			op: admission.Create, obj: service("203.0.113.7", "198.51.100.1"), wantFields: []string{"spec.externalIPs[1]"}},
		{name: "IPv6 CIDR", cidrs: []string{"2001:db8::/64"}, user: "tenant", op: admission.Create,
			obj: service("2001:db8::5")},
		{name: "update keeping existing addresses", user: "tenant", op: admission.Update,
			old: service("203.0.113.7"), obj: service("203.0.113.7")},
		{name: "update removing an address", user: "tenant", op: admission.Update,
			old: service("203.0.113.7", "203.0.113.8"), obj: service("203.0.113.8")},
		{name: "update adding an address", user: "tenant", op: admission.Update,
			old: service("203.0.113.7"), obj: service("203.0.113.7", "203.0.113.9"), wantFields: []string{"spec.externalIPs[1]"}},
		{name: "status subresource is not checked", user: "tenant", op: admission.Update, subresource: "status",
			old: service(), obj: service("203.0.113.7")},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var cidrs []netip.Prefix
			for _, c := range tc.cidrs {
				cidrs = append(cidrs, netip.MustParsePrefix(c))
			}
			authz := &grantTo{user: "admin"}
			p := New(cidrs)
			p.SetAuthorizer(authorizer.AuthorizerFunc(authz.Authorize))
			if err := p.ValidateInitialization(); err != nil {
				t.Fatal(err)
			}
			a := admission.NewAttributesRecord(tc.obj, nil, corev1.SchemeGroupVersion.WithKind("Service"),
				"a", "web", corev1.SchemeGroupVersion.WithResource("services"), tc.subresource, tc.op,
				&metav1.CreateOptions{}, false, &user.DefaultInfo{Name: tc.user})
			if tc.old != nil {
				a = admission.NewAttributesRecord(tc.obj, tc.old, corev1.SchemeGroupVersion.WithKind("Service"),
					"a", "web", corev1.SchemeGroupVersion.WithResource("services"), tc.subresource, tc.op,
					&metav1.UpdateOptions{}, false, &user.DefaultInfo{Name: tc.user})
			}
			err := p.Validate(context.Background(), a, nil)
			if len(tc.wantFields) == 0 {
				if err != nil {
					t.Fatalf("got %v, want admitted", err)
				}
				return
			}
			if !apierrors.IsForbidden(err) {
				t.Fatalf("got %v, want 403 Forbidden", err)
			}
			for _, f := range tc.wantFields {
				if !strings.Contains(err.Error(), f+": Forbidden: external IP") {
					t.Errorf("got %q, want it to name %s", err, f)
				}
			}
			if strings.Count(err.Error(), "spec.externalIPs[") != len(tc.wantFields) {
				t.Errorf("got %q, want exactly %v named", err, tc.wantFields)
			}
		})
	}
}

func TestValidateAsksForServicesExternalIPs(t *testing.T) {
	authz := &grantTo{user: "admin"}
	p := New(nil)
	p.SetAuthorizer(authorizer.AuthorizerFunc(authz.Authorize))
	a := admission.NewAttributesRecord(service("203.0.113.7"), nil, corev1.SchemeGroupVersion.WithKind("Service"),
		"a", "web", corev1.SchemeGroupVersion.WithResource("services"), "", admission.Create,
		&metav1.CreateOptions{}, false, &user.DefaultInfo{Name: "tenant"})
	err := p.Validate(context.Background(), a, nil)
	if err == nil {
		t.Fatal("got admitted, want refused")
	}
	for _, want := range []string{`user "tenant" cannot create services/externalips in namespace "a"`, "--service-external-ip-cidrs is empty"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("got %q, want it to say %q", err, want)
		}
	}
	if len(authz.asked) != 1 {
		t.Fatalf("got %d authorizer calls, want 1", len(authz.asked))
	}
	got := authz.asked[0]
	if got.GetNamespace() != "a" || got.GetVerb() != "create" || got.GetResource() != "services" || got.GetSubresource() != "externalips" || !got.IsResourceRequest() {
		t.Errorf("got authorizer asked %+v, want create services/externalips in a", got)
	}
}

// An authorizer that fails counts as no permission: the request gets the
// plugin's 403, never a 500.
func TestValidateAuthorizerError(t *testing.T) {
	p := New(nil)
	p.SetAuthorizer(authorizer.AuthorizerFunc(func(context.Context, authorizer.Attributes) (authorizer.Decision, string, error) {
		return authorizer.DecisionNoOpinion, "", errors.New("role cache broken")
	}))
	a := admission.NewAttributesRecord(service("203.0.113.7"), nil, corev1.SchemeGroupVersion.WithKind("Service"),
		"a", "web", corev1.SchemeGroupVersion.WithResource("services"), "", admission.Create,
		&metav1.CreateOptions{}, false, &user.DefaultInfo{Name: "tenant"})
	if err := p.Validate(context.Background(), a, nil); !apierrors.IsForbidden(err) {
		t.Fatalf("got %v, want 403 Forbidden", err)
	}
}
