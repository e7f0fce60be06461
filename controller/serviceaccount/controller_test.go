package serviceaccount

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
)

func namespace(name string, phase corev1.NamespacePhase) *corev1.Namespace {
	return &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}, Status: corev1.NamespaceStatus{Phase: phase}}
}

func account(ns, name string) *corev1.ServiceAccount {
	return &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
}

// TestSync checks which namespaces end up with a "default" account.
func TestSync(t *testing.T) {
	for _, tc := range []struct {
		name    string
		objs    []runtime.Object
		want    bool
		labeled bool // the existing account has a label that must stay
	}{
		{name: "new namespace gets one", objs: []runtime.Object{namespace("a", corev1.NamespaceActive)}, want: true},
		{name: "namespace without a phase yet gets one", objs: []runtime.Object{namespace("a", "")}, want: true},
		{name: "terminating namespace gets none", objs: []runtime.Object{namespace("a", corev1.NamespaceTerminating)}},
		{name: "existing account is kept", labeled: true, want: true, objs: []runtime.Object{
			namespace("a", corev1.NamespaceActive),
			&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: "a", Name: "default", Labels: map[string]string{"keep": "me"}}},
		}},
		{name: "other accounts do not count", want: true, objs: []runtime.Object{namespace("a", corev1.NamespaceActive), account("a", "builder")}},
		{name: "missing namespace is skipped", objs: nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			client := fake.NewClientset(tc.objs...)
			factory := informers.NewSharedInformerFactory(client, 0)
			c := New(client, factory)
			for _, o := range tc.objs {
				switch o := o.(type) {
				case *corev1.Namespace:
					factory.Core().V1().Namespaces().Informer().GetStore().Add(o)
				case *corev1.ServiceAccount:
					factory.Core().V1().ServiceAccounts().Informer().GetStore().Add(o)
				}
			}
			if err := c.sync(ctx, "a"); err != nil {
				t.Fatalf("sync: %v", err)
			}
			sa, err := client.CoreV1().ServiceAccounts("a").Get(ctx, "default", metav1.GetOptions{})
			if got := err == nil; got != tc.want {
				t.Fatalf("default account exists: got %v, want %v (err %v)", got, tc.want, err)
			}
			if err != nil && !apierrors.IsNotFound(err) {
				t.Fatal(err)
			}
			if tc.labeled && sa.Labels["keep"] != "me" {
				t.Errorf("existing account was replaced: labels %v", sa.Labels)
			}
		})
	}
}

// TestRecreate deletes the default account and checks it comes back.
func TestRecreate(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	client := fake.NewClientset(namespace("a", corev1.NamespaceActive))
	factory := informers.NewSharedInformerFactory(client, 0)
	c := New(client, factory)
	done := make(chan struct{})
	go func() { c.Run(ctx, 1); close(done) }()
	defer func() { cancel(); <-done }()

	watch, err := client.CoreV1().ServiceAccounts("a").Watch(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer watch.Stop()
	waitFor := func(want string) {
		t.Helper()
		for ev := range watch.ResultChan() {
			if string(ev.Type) == want {
				return
			}
		}
		t.Fatalf("watch ended before %s", want)
	}
	if _, err := client.CoreV1().ServiceAccounts("a").Get(ctx, "default", metav1.GetOptions{}); err != nil {
		waitFor("ADDED")
	}
	if err := client.CoreV1().ServiceAccounts("a").Delete(ctx, "default", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor("DELETED")
	waitFor("ADDED")
}
