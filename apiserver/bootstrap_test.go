package apiserver

import (
	"context"
	"testing"

	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
)

func TestEnsureIngressClass(t *testing.T) {
	edited := &networkingv1.IngressClass{ObjectMeta: metav1.ObjectMeta{Name: "portal"},
		Spec: networkingv1.IngressClassSpec{Controller: "portal.dev/ingress"}}
	tests := []struct {
		name        string
		existing    []runtime.Object
		className   string
		wantClasses int
		wantDefault string // annotation value on "portal"; "" when absent
	}{
		{name: "created when missing", className: "portal", wantClasses: 1, wantDefault: "true"},
		{name: "user's edits kept", existing: []runtime.Object{edited}, className: "portal", wantClasses: 1, wantDefault: ""},
		{name: "none asked", className: "", wantClasses: 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			client := fake.NewClientset(tc.existing...)
			ctx := context.Background()
			if err := ensureIngressClass(ctx, client, tc.className, "portal.dev/ingress"); err != nil {
				t.Fatal(err)
			}
			list, err := client.NetworkingV1().IngressClasses().List(ctx, metav1.ListOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if len(list.Items) != tc.wantClasses {
				t.Fatalf("got %d IngressClasses, want %d", len(list.Items), tc.wantClasses)
			}
			if tc.wantClasses == 0 {
				return
			}
			ic := list.Items[0]
			if ic.Name != "portal" || ic.Spec.Controller != "portal.dev/ingress" {
				t.Errorf("got class %s of %s, want portal of portal.dev/ingress", ic.Name, ic.Spec.Controller)
			}
			if got := ic.Annotations[networkingv1.AnnotationIsDefaultIngressClass]; got != tc.wantDefault {
				t.Errorf("got default-class annotation %q, want %q", got, tc.wantDefault)
			}
		})
	}
}
