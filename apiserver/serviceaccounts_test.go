package apiserver

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
)

// TestTokenObjectsFallBack: what the informer cache has not seen yet is
// asked for through the API, so a token minted for a pod created a moment
// ago authenticates; what neither has is NotFound.
func TestTokenObjectsFallBack(t *testing.T) {
	cached := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "cached", UID: "c"}}
	fresh := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "fresh", UID: "f"}}
	client := fake.NewClientset(cached, fresh)
	factory := informers.NewSharedInformerFactory(client, 0)
	objs := newTokenObjects(factory, client)
	factory.Core().V1().Pods().Informer().GetStore().Add(cached)
	for _, tc := range []struct {
		name, want string
	}{{"cached", "c"}, {"fresh", "f"}} {
		p, err := objs.GetPod("ns", tc.name)
		if err != nil || string(p.UID) != tc.want {
			t.Errorf("pod %s: got %v, %v; want uid %s", tc.name, p, err, tc.want)
		}
	}
	if _, err := objs.GetPod("ns", "gone"); !apierrors.IsNotFound(err) {
		t.Errorf("missing pod: got %v, want NotFound", err)
	}
	if _, err := objs.GetServiceAccount("ns", "gone"); !apierrors.IsNotFound(err) {
		t.Errorf("missing account: got %v, want NotFound", err)
	}
}
