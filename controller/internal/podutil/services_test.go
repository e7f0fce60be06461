package podutil

import (
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
)

func service(ns, name string, selector map[string]string) *corev1.Service {
	return &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: corev1.ServiceSpec{Selector: selector}}
}

func TestSelectingKeys(t *testing.T) {
	svcs := []*corev1.Service{
		service("ns", "web", map[string]string{"app": "web"}),
		service("ns", "web-canary", map[string]string{"app": "web", "track": "canary"}),
		service("ns", "db", map[string]string{"app": "db"}),
		service("ns", "everything", map[string]string{}),
		service("ns", "no-selector", nil),
		service("other", "web", map[string]string{"app": "web"}),
	}
	tests := []struct {
		name   string
		ns     string
		labels map[string]string
		want   []string
	}{
		{"one match and the empty selector", "ns", map[string]string{"app": "web"}, []string{"ns/everything", "ns/web"}},
		{"every label of a selector must match", "ns", map[string]string{"app": "web", "track": "canary"}, []string{"ns/everything", "ns/web", "ns/web-canary"}},
		{"no labels", "ns", nil, []string{"ns/everything"}},
		{"other namespace", "other", map[string]string{"app": "web"}, []string{"other/web"}},
		{"namespace without services", "none", map[string]string{"app": "web"}, nil},
	}
	for _, indexed := range []bool{true, false} {
		inf := informers.NewSharedInformerFactory(fake.NewClientset(), 0).Core().V1().Services().Informer()
		var sel *Selecting
		if indexed {
			sel = NewSelecting(inf)
		} else {
			// An informer that refused the index: lookups list the namespace.
			sel = &Selecting{services: NewSelecting(inf).services}
		}
		for _, svc := range svcs {
			if err := inf.GetIndexer().Add(svc); err != nil {
				t.Fatal(err)
			}
		}
		for _, tc := range tests {
			t.Run(tc.name, func(t *testing.T) {
				got, err := sel.Keys(tc.ns, tc.labels)
				if err != nil || !slices.Equal(got, tc.want) {
					t.Errorf("indexed=%v: got %v (err %v), want %v", indexed, got, err, tc.want)
				}
			})
		}
	}
}

// A second controller on the same informer finds the index the first added.
func TestNewSelectingSharesTheIndex(t *testing.T) {
	inf := informers.NewSharedInformerFactory(fake.NewClientset(), 0).Core().V1().Services().Informer()
	NewSelecting(inf)
	second := NewSelecting(inf)
	if second.indexer == nil {
		t.Errorf("second NewSelecting: got no index, want the one the first added")
	}
}
