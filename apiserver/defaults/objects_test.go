package defaults

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestObjectDefaults(t *testing.T) {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "team-a"}}
	Namespace(ns)
	unnamed := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "team-"}}
	Namespace(unnamed)
	secret := &corev1.Secret{}
	Secret(secret)
	typed := &corev1.Secret{Type: corev1.SecretTypeTLS, Data: map[string][]byte{"a": []byte("1"), "b": []byte("2")}, StringData: map[string]string{"b": "two", "c": "three"}}
	Secret(typed)
	cm := &corev1.ConfigMap{}
	ConfigMap(cm)
	ep := &corev1.Endpoints{Subsets: []corev1.EndpointSubset{{Ports: []corev1.EndpointPort{{Port: 80}, {Port: 53, Protocol: corev1.ProtocolUDP}}}}}
	Endpoints(ep)
	es := &discoveryv1.EndpointSlice{Ports: []discoveryv1.EndpointPort{{}}}
	EndpointSlice(es)
	node := &corev1.Node{Status: corev1.NodeStatus{Capacity: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("4")}}}
	Node(node)
	ic := &networkingv1.IngressClass{Spec: networkingv1.IngressClassSpec{Parameters: &networkingv1.IngressClassParametersReference{Kind: "Params", Name: "p"}}}
	IngressClass(ic)

	cases := []struct {
		name      string
		got, want any
	}{
		{"namespace name label", ns.Labels[corev1.LabelMetadataName], "team-a"},
		{"namespace phase", ns.Status.Phase, corev1.NamespaceActive},
		{"generateName namespace gets no label", len(unnamed.Labels), 0},
		{"secret type", secret.Type, corev1.SecretTypeOpaque},
		{"secret type kept", typed.Type, corev1.SecretTypeTLS},
		{"secret stringData merged", typed.Data, map[string][]byte{"a": []byte("1"), "b": []byte("two"), "c": []byte("three")}},
		{"secret stringData cleared", typed.StringData, map[string]string(nil)},
		{"configmap data", cm.Data != nil, true},
		{"endpoints protocol", ep.Subsets[0].Ports[0].Protocol, corev1.ProtocolTCP},
		{"endpoints protocol kept", ep.Subsets[0].Ports[1].Protocol, corev1.ProtocolUDP},
		{"endpointslice port name", *es.Ports[0].Name, ""},
		{"endpointslice protocol", *es.Ports[0].Protocol, corev1.ProtocolTCP},
		{"node allocatable", node.Status.Allocatable.Cpu().String(), "4"},
		{"ingressclass scope", *ic.Spec.Parameters.Scope, networkingv1.IngressClassParametersReferenceScopeCluster},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			expect(t, tc.name, tc.got, tc.want)
		})
	}
}
