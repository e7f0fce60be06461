package podutil

import (
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
)

func pod(name, node string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name},
		Spec: corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{
			Name: "c", Ports: []corev1.ContainerPort{{Name: "web", ContainerPort: 8080, Protocol: corev1.ProtocolTCP}},
		}}},
	}
}

func TestFindPort(t *testing.T) {
	always := corev1.ContainerRestartPolicyAlways
	withSidecar := pod("a", "n")
	withSidecar.Spec.InitContainers = []corev1.Container{
		{Name: "setup", Ports: []corev1.ContainerPort{{Name: "setup", ContainerPort: 9, Protocol: corev1.ProtocolTCP}}},
		{Name: "proxy", RestartPolicy: &always,
			Ports: []corev1.ContainerPort{{Name: "proxy", ContainerPort: 15001, Protocol: corev1.ProtocolTCP}}},
	}
	tests := []struct {
		name   string
		target intstr.IntOrString
		proto  corev1.Protocol
		pod    *corev1.Pod
		want   int32
		wantOK bool
	}{
		{"number", intstr.FromInt32(9000), corev1.ProtocolTCP, pod("a", "n"), 9000, true},
		{"unset means the service port", intstr.IntOrString{}, corev1.ProtocolTCP, pod("a", "n"), 80, true},
		{"name", intstr.FromString("web"), corev1.ProtocolTCP, pod("a", "n"), 8080, true},
		{"name with other protocol", intstr.FromString("web"), corev1.ProtocolUDP, pod("a", "n"), 0, false},
		{"unknown name", intstr.FromString("nope"), corev1.ProtocolTCP, pod("a", "n"), 0, false},
		{"sidecar port", intstr.FromString("proxy"), corev1.ProtocolTCP, withSidecar, 15001, true},
		{"init container that does not keep running", intstr.FromString("setup"), corev1.ProtocolTCP, withSidecar, 0, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			sp := &corev1.ServicePort{Port: 80, Protocol: tc.proto, TargetPort: tc.target}
			got, ok := FindPort(tc.pod, sp)
			if got != tc.want || ok != tc.wantOK {
				t.Errorf("got %d, %v; want %d, %v", got, ok, tc.want, tc.wantOK)
			}
		})
	}
}

func TestIsReady(t *testing.T) {
	tests := []struct {
		name       string
		conditions []corev1.PodCondition
		want       bool
	}{
		{"no conditions", nil, false},
		{"ready", []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}, true},
		{"not ready", []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionFalse}}, false},
		{"other condition true", []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionTrue}}, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := pod("a", "n")
			p.Status.Conditions = tc.conditions
			if got := IsReady(p); got != tc.want {
				t.Errorf("got %v, want %v", got, tc.want)
			}
		})
	}
}

// TestByNode checks both ways of finding a node's Pods give the same
// answer: the shared index, added once whichever controller comes first,
// and the scan used when the index cannot be added.
func TestByNode(t *testing.T) {
	pods := []*corev1.Pod{pod("a", "n1"), pod("b", "n2"), pod("c", "n1"), pod("d", "")}
	factory := informers.NewSharedInformerFactory(fake.NewClientset(), 0)
	inf := factory.Core().V1().Pods().Informer()
	for _, p := range pods {
		if err := inf.GetIndexer().Add(p); err != nil {
			t.Fatal(err)
		}
	}
	indexed := NewByNode(inf)
	again := NewByNode(inf) // a second controller finds the index
	if indexed.indexer == nil || again.indexer == nil {
		t.Fatal("the index was not added, or not found the second time")
	}
	scan := &ByNode{pods: indexed.pods}
	for _, b := range []struct {
		name string
		by   *ByNode
	}{{"index", indexed}, {"second", again}, {"scan", scan}} {
		for node, want := range map[string][]string{"n1": {"a", "c"}, "n2": {"b"}, "": {"d"}, "n3": nil} {
			got, err := b.by.On(node)
			if err != nil {
				t.Fatal(err)
			}
			var names []string
			for _, p := range got {
				names = append(names, p.Name)
			}
			slices.Sort(names)
			if !slices.Equal(names, want) {
				t.Errorf("%s: pods on %q: got %v, want %v", b.name, node, names, want)
			}
		}
	}
}
