package rootcacertpublisher

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
)

const ca = "-----BEGIN CERTIFICATE-----\nroot\n-----END CERTIFICATE-----\n"

func TestSync(t *testing.T) {
	active := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "a"}, Status: corev1.NamespaceStatus{Phase: corev1.NamespaceActive}}
	terminating := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "a"}, Status: corev1.NamespaceStatus{Phase: corev1.NamespaceTerminating}}
	stale := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "a", Name: ConfigMapName},
		Data: map[string]string{DataKey: "old", "extra": "x"}}
	for _, tc := range []struct {
		name   string
		objs   []runtime.Object
		wantCA string // "" when no ConfigMap should exist
	}{
		{name: "new namespace gets it", objs: []runtime.Object{active}, wantCA: ca},
		{name: "stale content is replaced", objs: []runtime.Object{active, stale}, wantCA: ca},
		{name: "terminating namespace gets none", objs: []runtime.Object{terminating}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			client := fake.NewClientset(tc.objs...)
			factory := informers.NewSharedInformerFactory(client, 0)
			p := New(client, factory, []byte(ca))
			for _, o := range tc.objs {
				switch o := o.(type) {
				case *corev1.Namespace:
					factory.Core().V1().Namespaces().Informer().GetStore().Add(o)
				case *corev1.ConfigMap:
					factory.Core().V1().ConfigMaps().Informer().GetStore().Add(o)
				}
			}
			if err := p.sync(ctx, "a"); err != nil {
				t.Fatal(err)
			}
			cm, err := client.CoreV1().ConfigMaps("a").Get(ctx, ConfigMapName, metav1.GetOptions{})
			if tc.wantCA == "" {
				if err == nil {
					t.Fatalf("got ConfigMap %v, want none", cm.Data)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := cm.Data[DataKey]; got != tc.wantCA || len(cm.Data) != 1 {
				t.Errorf("data: got %v, want only ca.crt %q", cm.Data, tc.wantCA)
			}
			if cm.Annotations[DescriptionAnnotation] == "" {
				t.Errorf("no %s annotation", DescriptionAnnotation)
			}
		})
	}
}
