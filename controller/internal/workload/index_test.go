package workload

import (
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
)

func TestByControllerCandidates(t *testing.T) {
	owner := &metav1.ObjectMeta{Name: "web", Namespace: "ns", UID: "rs-uid"}
	ours := ControllerRef(owner, rsKind)
	theirs := ControllerRef(&metav1.ObjectMeta{Name: "other", UID: "other-uid"}, rsKind)
	inOther := claimPod("other-ns-orphan", nil, nil)
	inOther.Namespace = "elsewhere"
	pods := []*corev1.Pod{claimPod("owned", nil, &ours), claimPod("orphan", nil, nil), claimPod("theirs", nil, &theirs), inOther}

	for _, indexed := range []bool{true, false} {
		inf := informers.NewSharedInformerFactory(fake.NewClientset(), 0).Core().V1().Pods().Informer()
		var b *ByController[*corev1.Pod]
		if indexed {
			b = NewByController[*corev1.Pod](inf)
		} else {
			b = &ByController[*corev1.Pod]{indexer: inf.GetIndexer()}
		}
		for _, p := range pods {
			if err := inf.GetIndexer().Add(p); err != nil {
				t.Fatal(err)
			}
		}
		got, err := b.Candidates("ns", "rs-uid")
		if err != nil {
			t.Fatal(err)
		}
		slices.SortFunc(got, func(a, b *corev1.Pod) int { return strings.Compare(a.Name, b.Name) })
		if names(got) != "orphan,owned" {
			t.Errorf("indexed %v: got %s, want orphan,owned", indexed, names(got))
		}
	}
}
