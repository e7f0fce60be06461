package manager

import (
	"strings"
	"testing"
	"testing/synctest"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/cache"
)

// TestGateWaitsForTheTerm pins what Run relies on when leadership ends:
// closing the gate waits for the term's controllers to stop, and a term
// whose callback starts only after that does not start at all.
func TestGateWaitsForTheTerm(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := &gate{}
		if !g.enter() {
			t.Fatal("an open gate refused a term")
		}
		closed := make(chan struct{})
		go func() { g.closeAndWait(); close(closed) }()
		synctest.Wait()
		select {
		case <-closed:
			t.Fatal("closeAndWait returned while a term was still inside")
		default:
		}
		g.leave()
		synctest.Wait()
		select {
		case <-closed:
		default:
			t.Fatal("closeAndWait did not return once the term left")
		}
		if g.enter() {
			t.Error("a closed gate let a late term in")
		}
	})
}

func TestValidateRefusesANodeMaskThatDoesNotFit(t *testing.T) {
	o := DefaultOptions()
	o.ClusterCIDR = "10.244.0.0/25" // smaller than the /24 each node gets
	if err := o.Validate(); err == nil || !strings.Contains(err.Error(), "node mask size /24 is larger than the cluster CIDR") {
		t.Errorf("Validate: got %v, want the node mask size refused", err)
	}
	o.ClusterCIDR = "10.244.0.0/16"
	if err := o.Validate(); err != nil {
		t.Errorf("Validate of the defaults with a /16: %v", err)
	}
}

func TestTrimManagedFields(t *testing.T) {
	fields := []metav1.ManagedFieldsEntry{{Manager: "endpoint-controller", Operation: metav1.ManagedFieldsOperationUpdate}}
	meta := metav1.ObjectMeta{Name: "web", Namespace: "ns", ManagedFields: fields}
	tests := []struct {
		name string
		obj  runtime.Object
		keep bool
	}{
		{"pod", &corev1.Pod{ObjectMeta: *meta.DeepCopy()}, false},
		{"service", &corev1.Service{ObjectMeta: *meta.DeepCopy()}, false},
		{"endpoints keep theirs", &corev1.Endpoints{ObjectMeta: *meta.DeepCopy()}, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := trimManagedFields(tc.obj)
			if err != nil {
				t.Fatal(err)
			}
			n := len(got.(metav1.Object).GetManagedFields())
			if want := map[bool]int{true: 1, false: 0}[tc.keep]; n != want {
				t.Errorf("managedFields entries: got %d, want %d", n, want)
			}
		})
	}
	tomb := cache.DeletedFinalStateUnknown{Key: "ns/web", Obj: &corev1.Pod{}}
	if got, err := trimManagedFields(tomb); err != nil || got != any(tomb) {
		t.Errorf("tombstone: got %v, %v; want it unchanged", got, err)
	}
}
