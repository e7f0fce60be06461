package defaultingressclass

import (
	"context"
	"testing"
	"time"

	networkingv1 "k8s.io/api/networking/v1"
	networkingv1beta1 "k8s.io/api/networking/v1beta1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apiserver/pkg/admission"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/cache"
)

// class is an IngressClass created at minute age, marked default or not.
func class(name string, age int, isDefault string) *networkingv1.IngressClass {
	c := &networkingv1.IngressClass{ObjectMeta: metav1.ObjectMeta{
		Name:              name,
		CreationTimestamp: metav1.NewTime(time.Date(2026, 1, 1, 0, age, 0, 0, time.UTC)),
	}}
	if isDefault != "" {
		c.Annotations = map[string]string{networkingv1.AnnotationIsDefaultIngressClass: isDefault}
	}
	return c
}

// newPlugin returns a plugin whose informer holds classes, synced.
func newPlugin(t *testing.T, classes ...*networkingv1.IngressClass) *Plugin {
	t.Helper()
	objs := make([]runtime.Object, 0, len(classes))
	for _, c := range classes {
		objs = append(objs, c)
	}
	factory := informers.NewSharedInformerFactory(fake.NewClientset(objs...), 0)
	p := New()
	p.SetExternalKubeInformerFactory(factory)
	if err := p.ValidateInitialization(); err != nil {
		t.Fatal(err)
	}
	factory.Start(t.Context().Done())
	t.Cleanup(factory.Shutdown)
	if !cache.WaitForCacheSync(t.Context().Done(), factory.Networking().V1().IngressClasses().Informer().HasSynced) {
		t.Fatal("informer did not sync")
	}
	return p
}

func attrs(ing *networkingv1.Ingress, op admission.Operation, subresource string) admission.Attributes {
	return admission.NewAttributesRecord(ing, nil, networkingv1.SchemeGroupVersion.WithKind("Ingress"),
		"ns", ing.Name, networkingv1.SchemeGroupVersion.WithResource("ingresses"), subresource, op,
		&metav1.CreateOptions{}, false, &user.DefaultInfo{Name: "test"})
}

func TestAdmit(t *testing.T) {
	ptr := func(s string) *string { return &s }
	tests := []struct {
		name        string
		classes     []*networkingv1.IngressClass
		className   *string
		annotations map[string]string
		op          admission.Operation
		subresource string
		want        *string
	}{
		{name: "default filled in", classes: []*networkingv1.IngressClass{class("portal", 0, "true"), class("other", 1, "")},
			op: admission.Create, want: ptr("portal")},
		{name: "no default class", classes: []*networkingv1.IngressClass{class("portal", 0, ""), class("x", 1, "false")},
			op: admission.Create, want: nil},
		{name: "no class at all", op: admission.Create, want: nil},
		{name: "class named is kept", classes: []*networkingv1.IngressClass{class("portal", 0, "true")},
			className: ptr("nginx"), op: admission.Create, want: ptr("nginx")},
		{name: "legacy annotation wins", classes: []*networkingv1.IngressClass{class("portal", 0, "true")},
			annotations: map[string]string{networkingv1beta1.AnnotationIngressClass: "nginx"}, op: admission.Create, want: nil},
		{name: "empty legacy annotation still counts", classes: []*networkingv1.IngressClass{class("portal", 0, "true")},
			annotations: map[string]string{networkingv1beta1.AnnotationIngressClass: ""}, op: admission.Create, want: nil},
		{name: "newest of two defaults", classes: []*networkingv1.IngressClass{class("old", 0, "true"), class("new", 5, "true")},
			op: admission.Create, want: ptr("new")},
		{name: "same age: first name", classes: []*networkingv1.IngressClass{class("b", 3, "true"), class("a", 3, "true")},
			op: admission.Create, want: ptr("a")},
		{name: "status writes untouched", classes: []*networkingv1.IngressClass{class("portal", 0, "true")},
			op: admission.Update, subresource: "status", want: nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := newPlugin(t, tc.classes...)
			ing := &networkingv1.Ingress{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web", Annotations: tc.annotations},
				Spec: networkingv1.IngressSpec{IngressClassName: tc.className}}
			if p.Handles(tc.op) {
				if err := p.Admit(context.Background(), attrs(ing, tc.op, tc.subresource), nil); err != nil {
					t.Fatalf("admit: %v", err)
				}
			}
			got := ing.Spec.IngressClassName
			switch {
			case got == nil && tc.want == nil:
			case got == nil || tc.want == nil || *got != *tc.want:
				t.Errorf("got ingressClassName %v, want %v", show(got), show(tc.want))
			}
		})
	}
}

func show(s *string) string {
	if s == nil {
		return "<unset>"
	}
	return *s
}

// Updates are not the plugin's: an Ingress stored without a class keeps
// none when it is changed, even once a default class exists.
func TestUpdatesNotHandled(t *testing.T) {
	if p := New(); p.Handles(admission.Update) || !p.Handles(admission.Create) {
		t.Errorf("handles update %v, create %v; want false, true", p.Handles(admission.Update), p.Handles(admission.Create))
	}
}
