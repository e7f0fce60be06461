package validation

import (
	"testing"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestValidateLease(t *testing.T) {
	cases := []struct {
		name string
		spec coordinationv1.LeaseSpec
		want []wantErr
	}{
		{name: "valid", spec: coordinationv1.LeaseSpec{HolderIdentity: ptr("node-1"), LeaseDurationSeconds: ptr(int32(40)), LeaseTransitions: ptr(int32(0))}},
		{name: "zero duration", spec: coordinationv1.LeaseSpec{LeaseDurationSeconds: ptr(int32(0))},
			want: []wantErr{e("spec.leaseDurationSeconds", tInvalid, "must be greater than 0")}},
		{name: "negative transitions", spec: coordinationv1.LeaseSpec{LeaseTransitions: ptr(int32(-1))},
			want: []wantErr{e("spec.leaseTransitions", tInvalid, "must be greater than or equal to 0")}},
		{name: "known strategy", spec: coordinationv1.LeaseSpec{Strategy: ptr(coordinationv1.OldestEmulationVersion)}},
		{name: "prefixed strategy", spec: coordinationv1.LeaseSpec{Strategy: ptr(coordinationv1.CoordinatedLeaseStrategy("example.com/Mine"))}},
		{name: "unknown strategy", spec: coordinationv1.LeaseSpec{Strategy: ptr(coordinationv1.CoordinatedLeaseStrategy("Newest"))},
			want: []wantErr{e("spec.strategy.strategy", tNotSupported)}},
		{name: "preferredHolder without strategy", spec: coordinationv1.LeaseSpec{PreferredHolder: ptr("node-2")},
			want: []wantErr{e("spec.preferredHolder", tForbidden, "may only be specified if `strategy` is defined")}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			lease := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: "node-1", Namespace: "kube-node-lease", ResourceVersion: "1"}, Spec: tc.spec}
			checkErrs(t, ValidateLease(lease), tc.want...)
			checkErrs(t, ValidateLeaseUpdate(lease, lease), tc.want...)
		})
	}
}

func validIngress() *networkingv1.Ingress {
	prefix := networkingv1.PathTypePrefix
	return &networkingv1.Ingress{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "ns", ResourceVersion: "1"},
		Spec: networkingv1.IngressSpec{
			IngressClassName: ptr("nginx"),
			Rules: []networkingv1.IngressRule{{
				Host: "www.example.com",
				IngressRuleValue: networkingv1.IngressRuleValue{HTTP: &networkingv1.HTTPIngressRuleValue{Paths: []networkingv1.HTTPIngressPath{{
					Path: "/", PathType: &prefix,
					Backend: networkingv1.IngressBackend{Service: &networkingv1.IngressServiceBackend{Name: "web", Port: networkingv1.ServiceBackendPort{Number: 80}}},
				}}}},
			}},
			TLS: []networkingv1.IngressTLS{{Hosts: []string{"www.example.com"}, SecretName: "web-tls"}},
		},
	}
}

func TestValidateIngress(t *testing.T) {
	path := func(ing *networkingv1.Ingress) *networkingv1.HTTPIngressPath { return &ing.Spec.Rules[0].HTTP.Paths[0] }
	backend := func(ing *networkingv1.Ingress) *networkingv1.IngressServiceBackend { return path(ing).Backend.Service }
	const p0 = "spec.rules[0].http.paths[0]"
	cases := []struct {
		name string
		edit func(*networkingv1.Ingress)
		want []wantErr
	}{
		{name: "valid"},
		{name: "default backend only", edit: func(ing *networkingv1.Ingress) {
			ing.Spec.DefaultBackend, ing.Spec.Rules = &path(ing).Backend, nil
		}},
		{name: "neither rules nor default backend", edit: func(ing *networkingv1.Ingress) { ing.Spec.Rules = nil },
			want: []wantErr{e("spec", tInvalid, "either `defaultBackend` or `rules` must be specified")}},
		{name: "wildcard host", edit: func(ing *networkingv1.Ingress) { ing.Spec.Rules[0].Host = "*.example.com" }},
		{name: "bad wildcard host", edit: func(ing *networkingv1.Ingress) { ing.Spec.Rules[0].Host = "www.*.com" },
			want: []wantErr{e("spec.rules[0].host", tInvalid, "wildcard DNS-1123 subdomain")}},
		{name: "IP host", edit: func(ing *networkingv1.Ingress) { ing.Spec.Rules[0].Host = "192.0.2.1" },
			want: []wantErr{e("spec.rules[0].host", tInvalid, "must be a DNS name, not an IP address")}},
		{name: "pathType required", edit: func(ing *networkingv1.Ingress) { path(ing).PathType = nil },
			want: []wantErr{e(p0+".pathType", tRequired, "pathType must be specified")}},
		{name: "pathType unknown", edit: func(ing *networkingv1.Ingress) { path(ing).PathType = ptr(networkingv1.PathType("Regex")) },
			want: []wantErr{e(p0+".pathType", tNotSupported, `"Exact", "ImplementationSpecific", "Prefix"`)}},
		{name: "Exact path must be absolute", edit: func(ing *networkingv1.Ingress) {
			path(ing).PathType, path(ing).Path = ptr(networkingv1.PathTypeExact), "api"
		}, want: []wantErr{e(p0+".path", tInvalid, "must be an absolute path")}},
		{name: "Prefix path with dot-dot", edit: func(ing *networkingv1.Ingress) { path(ing).Path = "/a/../b" },
			want: []wantErr{e(p0+".path", tInvalid, "must not contain '/../'")}},
		{name: "ImplementationSpecific empty path", edit: func(ing *networkingv1.Ingress) {
			path(ing).PathType, path(ing).Path = ptr(networkingv1.PathTypeImplementationSpecific), ""
		}},
		{name: "backend port name", edit: func(ing *networkingv1.Ingress) { backend(ing).Port = networkingv1.ServiceBackendPort{Name: "http"} }},
		{name: "backend port name and number", edit: func(ing *networkingv1.Ingress) { backend(ing).Port.Name = "http" },
			want: []wantErr{e(p0+".backend", tInvalid, "cannot set both port name & port number")}},
		{name: "backend port missing", edit: func(ing *networkingv1.Ingress) { backend(ing).Port.Number = 0 },
			want: []wantErr{e(p0+".backend", tRequired, "port name or number is required")}},
		{name: "backend port name invalid", edit: func(ing *networkingv1.Ingress) {
			backend(ing).Port = networkingv1.ServiceBackendPort{Name: "http--alt"}
		},
			want: []wantErr{e(p0+".backend.service.port.name", tInvalid)}},
		{name: "backend service name not DNS-1035", edit: func(ing *networkingv1.Ingress) { backend(ing).Name = "1web" },
			want: []wantErr{e(p0+".backend.service.name", tInvalid)}},
		{name: "backend missing", edit: func(ing *networkingv1.Ingress) { path(ing).Backend = networkingv1.IngressBackend{} },
			want: []wantErr{e(p0+".backend", tInvalid, "resource or service backend is required")}},
		{name: "resource backend", edit: func(ing *networkingv1.Ingress) {
			path(ing).Backend = networkingv1.IngressBackend{Resource: &corev1.TypedLocalObjectReference{APIGroup: ptr("example.com"), Kind: "Bucket", Name: "static"}}
		}},
		{name: "resource backend without kind", edit: func(ing *networkingv1.Ingress) {
			path(ing).Backend = networkingv1.IngressBackend{Resource: &corev1.TypedLocalObjectReference{Name: "static"}}
		}, want: []wantErr{e(p0+".backend.resource.kind", tRequired)}},
		{name: "tls secret name invalid", edit: func(ing *networkingv1.Ingress) { ing.Spec.TLS[0].SecretName = "Web_TLS" },
			want: []wantErr{e("spec.tls[0].secretName", tInvalid)}},
		{name: "class annotation disagrees", edit: func(ing *networkingv1.Ingress) {
			ing.Annotations = map[string]string{"kubernetes.io/ingress.class": "traefik"}
		}, want: []wantErr{e("annotations.kubernetes.io/ingress.class", tInvalid, "must match `ingressClassName` when both are specified")}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ing := validIngress()
			if tc.edit != nil {
				tc.edit(ing)
			}
			checkErrs(t, ValidateIngress(ing), tc.want...)
		})
	}
}

func TestValidateIngressUpdate(t *testing.T) {
	old := validIngress()
	old.Spec.TLS[0].SecretName = "Web_TLS"
	old.Spec.Rules[0].HTTP.Paths[0].Backend.Service.Name = "1web"
	n := old.DeepCopy()
	n.Labels = map[string]string{"a": "b"}
	checkErrs(t, ValidateIngressUpdate(n, old))

	fresh := validIngress()
	bad := fresh.DeepCopy()
	bad.Spec.Rules[0].HTTP.Paths[0].Backend.Service.Name = "1web"
	checkErrs(t, ValidateIngressUpdate(bad, fresh), e("spec.rules[0].http.paths[0].backend.service.name", tInvalid))
}

func TestValidateIngressStatusUpdate(t *testing.T) {
	old := validIngress()
	n := old.DeepCopy()
	n.Status.LoadBalancer.Ingress = []networkingv1.IngressLoadBalancerIngress{{IP: "192.0.2.1"}, {IP: "192.0.2"}, {Hostname: "192.0.2.2"}}
	checkErrs(t, ValidateIngressStatusUpdate(n, old),
		e("status.loadBalancer.ingress[1].ip", tInvalid),
		e("status.loadBalancer.ingress[2].hostname", tInvalid, "must be a DNS name, not an IP address"))
}

func TestValidateIngressClass(t *testing.T) {
	ic := func() *networkingv1.IngressClass {
		return &networkingv1.IngressClass{
			ObjectMeta: metav1.ObjectMeta{Name: "nginx", ResourceVersion: "1"},
			Spec:       networkingv1.IngressClassSpec{Controller: "k8s.io/ingress-nginx"},
		}
	}
	params := func(scope string, ns *string) func(*networkingv1.IngressClass) {
		return func(c *networkingv1.IngressClass) {
			c.Spec.Parameters = &networkingv1.IngressClassParametersReference{Kind: "Params", Name: "p", Scope: &scope, Namespace: ns}
		}
	}
	cases := []struct {
		name string
		edit func(*networkingv1.IngressClass)
		want []wantErr
	}{
		{name: "valid"},
		{name: "controller required", edit: func(c *networkingv1.IngressClass) { c.Spec.Controller = "" },
			want: []wantErr{e("spec.controller", tRequired)}},
		{name: "controller not domain-prefixed", edit: func(c *networkingv1.IngressClass) { c.Spec.Controller = "nginx" },
			want: []wantErr{e("spec.controller", tInvalid)}},
		{name: "cluster parameters", edit: params("Cluster", nil)},
		{name: "cluster parameters with namespace", edit: params("Cluster", ptr("ns")),
			want: []wantErr{e("spec.parameters.namespace", tForbidden, "`parameters.scope` is set to 'Cluster'")}},
		{name: "namespace parameters without namespace", edit: params("Namespace", nil),
			want: []wantErr{e("spec.parameters.namespace", tRequired)}},
		{name: "unknown scope", edit: params("Global", nil),
			want: []wantErr{e("spec.parameters.scope", tNotSupported, `"Cluster", "Namespace"`)}},
		{name: "namespace forbidden", edit: func(c *networkingv1.IngressClass) { c.Namespace = "ns" },
			want: []wantErr{e("metadata.namespace", tForbidden)}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := ic()
			if tc.edit != nil {
				tc.edit(c)
			}
			checkErrs(t, ValidateIngressClass(c), tc.want...)
		})
	}
	t.Run("controller immutable", func(t *testing.T) {
		old := ic()
		n := ic()
		n.Spec.Controller = "example.com/other"
		checkErrs(t, ValidateIngressClassUpdate(n, old), e("spec.controller", tInvalid, "field is immutable"))
	})
}
