// Package workloadtest holds the fixtures the workload controllers' unit
// tests share: their start time, what the fake API server leaves out on a
// create, informer caches brought up to what the fake holds, and the
// Events a fake recorder has. Only tests import it.
package workloadtest

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
)

// Epoch is when the tests' clocks and objects start.
var Epoch = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// OnCreate calls stamp on every object of resource the fake is asked to
// create, before the fake stores it: for what the real API server sets
// and the fake does not (a UID, a creation time, a name from
// generateName).
func OnCreate(client *fake.Clientset, resource string, stamp func(metav1.Object)) {
	client.PrependReactor("create", resource, func(a k8stesting.Action) (bool, runtime.Object, error) {
		if obj, ok := a.(k8stesting.CreateAction).GetObject().(metav1.Object); ok {
			stamp(obj)
		}
		return false, nil, nil
	})
}

// CatchUp makes idx hold exactly items (a List's Items), as a watch
// would, and tells h, when set, of each change as an informer tells its
// handlers.
func CatchUp[T any, P interface {
	*T
	runtime.Object
}](t testing.TB, idx cache.Indexer, items []T, h cache.ResourceEventHandler) {
	t.Helper()
	seen := map[string]bool{}
	for i := range items {
		obj := P(&items[i])
		key, err := cache.MetaNamespaceKeyFunc(obj)
		if err != nil {
			t.Fatal(err)
		}
		seen[key] = true
		old, exists, _ := idx.Get(obj)
		if err := idx.Update(obj); err != nil {
			t.Fatal(err)
		}
		switch {
		case h == nil:
		case exists:
			h.OnUpdate(old, obj)
		default:
			h.OnAdd(obj, false)
		}
	}
	for _, key := range idx.ListKeys() {
		if seen[key] {
			continue
		}
		old, _, _ := idx.GetByKey(key)
		if err := idx.Delete(old); err != nil {
			t.Fatal(err)
		}
		if h != nil {
			h.OnDelete(old)
		}
	}
}

// Events drains the Events rec has recorded so far, as "Type Reason
// Message" lines.
func Events(rec *record.FakeRecorder) []string {
	var out []string
	for {
		select {
		case e := <-rec.Events:
			out = append(out, e)
		default:
			return out
		}
	}
}
