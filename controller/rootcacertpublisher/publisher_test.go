package rootcacertpublisher

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"
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
					p.own.Core().V1().ConfigMaps().Informer().GetStore().Add(o)
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

// The publisher must not cache every ConfigMap of the cluster: its
// informer lists and watches kube-root-ca.crt only.
func TestWatchesOnlyItsConfigMap(t *testing.T) {
	client := fake.NewClientset()
	factory := informers.NewSharedInformerFactory(client, 0)
	p := New(client, factory, []byte(ca))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		p.Run(ctx, 1)
		close(done)
	}()
	if !cache.WaitForCacheSync(ctx.Done(), p.own.Core().V1().ConfigMaps().Informer().HasSynced) {
		t.Fatal("ConfigMap informer never synced")
	}
	cancel()
	<-done
	want := "metadata.name=" + ConfigMapName
	var saw bool
	for _, a := range client.Actions() {
		if a.GetResource().Resource != "configmaps" || (a.GetVerb() != "list" && a.GetVerb() != "watch") {
			continue
		}
		saw = true
		var got string
		switch a := a.(type) {
		case k8stesting.ListActionImpl:
			got = a.GetListRestrictions().Fields.String()
		case k8stesting.WatchActionImpl:
			got = a.GetWatchRestrictions().Fields.String()
		}
		if got != want {
			t.Errorf("%s configmaps with field selector %q, want %q", a.GetVerb(), got, want)
		}
	}
	if !saw {
		t.Error("no list or watch of configmaps")
	}
}
