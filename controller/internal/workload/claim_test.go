package workload

import (
	"context"
	"errors"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
)

func claimPod(name string, l map[string]string, owner *metav1.OwnerReference) *corev1.Pod {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", UID: types.UID(name + "-uid"), Labels: l}}
	if owner != nil {
		p.OwnerReferences = []metav1.OwnerReference{*owner}
	}
	return p
}

func TestClaim(t *testing.T) {
	owner := &metav1.ObjectMeta{Name: "web", Namespace: "ns", UID: "rs-uid"}
	ours := ControllerRef(owner, rsKind)
	theirs := ControllerRef(&metav1.ObjectMeta{Name: "other", UID: "other-uid"}, rsKind)
	match, nomatch := map[string]string{"app": "web"}, map[string]string{"app": "db"}
	now := metav1.Now()
	deleting := claimPod("orphan-deleting", match, nil)
	deleting.DeletionTimestamp = &now
	pods := []*corev1.Pod{
		claimPod("owned", match, &ours),
		claimPod("owned-nomatch", nomatch, &ours),
		claimPod("orphan", match, nil),
		claimPod("orphan-nomatch", nomatch, nil),
		claimPod("theirs", match, &theirs),
		deleting,
	}
	client := fake.NewClientset()
	for _, p := range pods {
		if _, err := client.CoreV1().Pods("ns").Create(context.Background(), p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	rechecks := 0
	c := &Claimer[*corev1.Pod]{
		Owner: owner, Kind: rsKind, Selector: labels.SelectorFromSet(match),
		Recheck: func(context.Context) (metav1.Object, error) { rechecks++; return owner, nil },
		Patch:   PatchPod(client),
	}
	claimed, err := c.Claim(context.Background(), pods)
	if err != nil {
		t.Fatal(err)
	}
	if got := names(claimed); got != "owned,orphan" {
		t.Errorf("claimed: got %s, want owned,orphan", got)
	}
	if rechecks != 1 {
		t.Errorf("rechecks: got %d, want 1", rechecks)
	}
	wantOwner := map[string]types.UID{
		"owned": "rs-uid", "owned-nomatch": "", "orphan": "rs-uid", "orphan-nomatch": "",
		"theirs": "other-uid", "orphan-deleting": "",
	}
	for name, want := range wantOwner {
		p, err := client.CoreV1().Pods("ns").Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		var got types.UID
		if ref := metav1.GetControllerOf(p); ref != nil {
			got = ref.UID
		}
		if got != want {
			t.Errorf("%s controller: got %q, want %q", name, got, want)
		}
	}
}

func TestClaimDoesNotAdoptForAGoneOwner(t *testing.T) {
	owner := &metav1.ObjectMeta{Name: "web", Namespace: "ns", UID: "rs-uid"}
	match := map[string]string{"app": "web"}
	now := metav1.Now()
	tests := []struct {
		name  string
		fresh metav1.Object
		err   error
	}{
		{"re-created under the same name", &metav1.ObjectMeta{Name: "web", UID: "new-uid"}, nil},
		{"being deleted", &metav1.ObjectMeta{Name: "web", UID: "rs-uid", DeletionTimestamp: &now}, nil},
		{"read fails", nil, errors.New("unavailable")},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			patched := 0
			c := &Claimer[*corev1.Pod]{
				Owner: owner, Kind: rsKind, Selector: labels.SelectorFromSet(match),
				Recheck: func(context.Context) (metav1.Object, error) { return tc.fresh, tc.err },
				Patch:   func(context.Context, *corev1.Pod, []byte) error { patched++; return nil },
			}
			claimed, err := c.Claim(context.Background(), []*corev1.Pod{claimPod("a", match, nil), claimPod("b", match, nil)})
			if len(claimed) != 0 || err == nil || patched != 0 {
				t.Errorf("got %d claimed, err %v, %d patches; want none, an error, none", len(claimed), err, patched)
			}
		})
	}
}

func TestClaimKeepsOwnedWhileOwnerIsDeleted(t *testing.T) {
	now := metav1.Now()
	owner := &metav1.ObjectMeta{Name: "web", Namespace: "ns", UID: "rs-uid", DeletionTimestamp: &now}
	ours := ControllerRef(owner, rsKind)
	c := &Claimer[*corev1.Pod]{
		Owner: owner, Kind: rsKind, Selector: labels.SelectorFromSet(map[string]string{"app": "web"}),
		Patch: func(context.Context, *corev1.Pod, []byte) error {
			t.Error("patched while the owner is being deleted")
			return nil
		},
	}
	pods := []*corev1.Pod{claimPod("nomatch", map[string]string{"app": "db"}, &ours), claimPod("orphan", map[string]string{"app": "web"}, nil)}
	if claimed, err := c.Claim(context.Background(), pods); len(claimed) != 0 || err != nil {
		t.Errorf("got %d claimed, err %v; want none, nil", len(claimed), err)
	}
}
