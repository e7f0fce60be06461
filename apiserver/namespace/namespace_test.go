package namespace

import (
	"context"
	"errors"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	testclock "k8s.io/utils/clock/testing"
)

func condition(ns *corev1.Namespace, typ corev1.NamespaceConditionType) corev1.NamespaceCondition {
	for _, c := range ns.Status.Conditions {
		if c.Type == typ {
			return c
		}
	}
	return corev1.NamespaceCondition{}
}

// TestTerminatingNamespaceSaysWhatBlocksIt pins issue 23: a namespace
// holding a pod that would not go stayed Terminating with no condition
// saying why. Its conditions now name what remains, as upstream's do, and
// turn back to False once it is gone.
func TestTerminatingNamespaceSaysWhatBlocksIt(t *testing.T) {
	now := metav1.Now()
	ns := &corev1.Namespace{
		ObjectMeta: metav1.ObjectMeta{Name: "doomed", DeletionTimestamp: &now},
		Spec:       corev1.NamespaceSpec{Finalizers: []corev1.FinalizerName{corev1.FinalizerKubernetes}},
		Status:     corev1.NamespaceStatus{Phase: corev1.NamespaceTerminating},
	}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "doomed", Name: "stuck", Finalizers: []string{"example.com/hold"}}}
	client := fake.NewClientset(ns, pod)
	// The pod's node never confirms it gone: deleting leaves it there.
	client.PrependReactor("delete-collection", "pods", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, nil
	})
	// Leases cannot be deleted at all.
	client.PrependReactor("delete-collection", "leases", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, errors.New("etcd is on fire")
	})
	c := New(client)
	clock := testclock.NewFakePassiveClock(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
	c.clock = clock
	ctx := context.Background()
	if err := c.sync(ctx, "doomed"); err == nil {
		t.Fatal("sync finished a namespace that still holds a pod")
	}
	got, err := client.CoreV1().Namespaces().Get(ctx, "doomed", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	want := []corev1.NamespaceCondition{
		{Type: corev1.NamespaceDeletionDiscoveryFailure, Status: corev1.ConditionFalse, Reason: "ResourcesDiscovered"},
		{Type: corev1.NamespaceDeletionGVParsingFailure, Status: corev1.ConditionFalse, Reason: "ParsedGroupVersions"},
		{Type: corev1.NamespaceDeletionContentFailure, Status: corev1.ConditionTrue, Reason: "ContentDeletionFailed",
			Message: "Failed to delete all resource types, 1 remaining: delete leases in doomed: etcd is on fire"},
		{Type: corev1.NamespaceContentRemaining, Status: corev1.ConditionTrue, Reason: "SomeResourcesRemain",
			Message: "Some resources are remaining: pods. has 1 resource instances"},
		{Type: corev1.NamespaceFinalizersRemaining, Status: corev1.ConditionTrue, Reason: "SomeFinalizerRemain",
			Message: "Some finalizers are remaining: example.com/hold in 1 resource instances"},
	}
	for _, w := range want {
		c := condition(got, w.Type)
		if c.Status != w.Status || c.Reason != w.Reason || (w.Message != "" && c.Message != w.Message) {
			t.Errorf("condition %s: got %s %s %q, want %s %s %q", w.Type, c.Status, c.Reason, c.Message, w.Status, w.Reason, w.Message)
		}
	}
	emptied := clock.Now().Add(time.Minute)
	clock.SetTime(emptied)

	// Once the pod is gone and leases delete, nothing blocks the namespace.
	client.PrependReactor("delete-collection", "leases", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, nil
	})
	if err := client.Tracker().Delete(corev1.SchemeGroupVersion.WithResource("pods"), "doomed", "stuck"); err != nil {
		t.Fatal(err)
	}
	client.ClearActions()
	if err := c.sync(ctx, "doomed"); err != nil {
		t.Fatalf("sync of an emptied namespace: %v", err)
	}
	// The namespace is gone now; its last status write is in the actions.
	got = nil
	for _, a := range client.Actions() {
		if u, ok := a.(k8stesting.UpdateAction); ok && u.GetSubresource() == "status" {
			got = u.GetObject().(*corev1.Namespace)
		}
	}
	if got == nil {
		t.Fatal("no status update once the namespace was empty")
	}
	for _, typ := range conditionTypes {
		if c := condition(got, typ); c.Status != corev1.ConditionFalse {
			t.Errorf("condition %s: got %s %s %q, want False", typ, c.Status, c.Reason, c.Message)
		}
	}
	if c := condition(got, corev1.NamespaceContentRemaining); !c.LastTransitionTime.Time.Equal(emptied) {
		t.Errorf("ContentRemaining went back to False: got transition time %v, want %v", c.LastTransitionTime, emptied)
	}
}

// TestUnchangedConditionsAreNotWritten: a namespace retried every few
// seconds while a pod terminates must not be rewritten each time.
func TestUnchangedConditionsAreNotWritten(t *testing.T) {
	left := &remaining{}
	left.add("pods.", nil)
	var status corev1.NamespaceStatus
	if !setConditions(&status, left, metav1.Now()) {
		t.Fatal("first conditions reported unchanged")
	}
	if setConditions(&status, left, metav1.Now()) {
		t.Error("the same state reported as a change")
	}
	left.add("pods.", nil)
	if !setConditions(&status, left, metav1.Now()) {
		t.Error("a second pod remaining reported unchanged")
	}
}
