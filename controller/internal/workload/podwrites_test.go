package workload

import (
	"errors"
	"fmt"
	"sync/atomic"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/record"
)

func writerPod(i int) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: fmt.Sprintf("new-%d", i)}}
}

func existingPod(name string) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, UID: types.UID("uid-" + name)}}
}

func TestPodWriter(t *testing.T) {
	refused := errors.New("refused")
	timeout := apierrors.NewTimeoutError("slow", 1)
	cases := []struct {
		name      string
		creates   int
		createErr func(n int32) error // for the nth create, from 1
		deletes   []string            // existing Pods to delete; "gone" is not found, "bad" fails
		wantAdds  int
		wantDels  int
		wantErr   bool
	}{
		{name: "creates and deletes are both expected", creates: 2, deletes: []string{"a"}, wantAdds: 2, wantDels: 1},
		// Regression: a failed create was taken off twice.
		{name: "a failed create is taken off once", creates: 3,
			createErr: func(n int32) error { return map[bool]error{true: refused}[n == 2] },
			wantAdds:  2, wantErr: true},
		{name: "creates never tried are taken off", creates: 4,
			createErr: func(int32) error { return refused }, wantAdds: 0, wantErr: true},
		{name: "a create that timed out stays expected", creates: 1,
			createErr: func(int32) error { return timeout }, wantAdds: 1, wantErr: true},
		{name: "a Pod already gone counts as deleted", deletes: []string{"a", "gone"}, wantDels: 1},
		{name: "a failed delete is taken off", deletes: []string{"bad"}, wantDels: 0, wantErr: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			client := fake.NewClientset(existingPod("a"), existingPod("bad"))
			var count atomic.Int32
			client.PrependReactor("create", "pods", func(clienttesting.Action) (bool, runtime.Object, error) {
				n := count.Add(1)
				if tc.createErr != nil {
					if err := tc.createErr(n); err != nil {
						return true, nil, err
					}
				}
				return false, nil, nil
			})
			client.PrependReactor("delete", "pods", func(a clienttesting.Action) (bool, runtime.Object, error) {
				if a.(clienttesting.DeleteAction).GetName() == "bad" {
					return true, nil, refused
				}
				return false, nil, nil
			})
			exp := &Expectations{}
			w := PodWriter{Client: client, Recorder: record.NewFakeRecorder(100), Expectations: exp}
			var del []*corev1.Pod
			for _, name := range tc.deletes {
				del = append(del, existingPod(name))
			}
			owner := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "owner"}}
			err := w.Write(t.Context(), "ns/owner", owner, tc.creates, writerPod, del)
			if (err != nil) != tc.wantErr {
				t.Fatalf("Write: got error %v, want error %v", err, tc.wantErr)
			}
			if adds, dels := exp.Pending("ns/owner"); adds != tc.wantAdds || dels != tc.wantDels {
				t.Fatalf("pending: got %d adds, %d dels, want %d, %d", adds, dels, tc.wantAdds, tc.wantDels)
			}
		})
	}
}
