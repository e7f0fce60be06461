package nodeaddr

import (
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
)

func node(addrs ...corev1.NodeAddress) *corev1.Node {
	return &corev1.Node{Status: corev1.NodeStatus{Addresses: addrs}}
}

func ext(a string) corev1.NodeAddress {
	return corev1.NodeAddress{Type: corev1.NodeExternalIP, Address: a}
}
func in(a string) corev1.NodeAddress {
	return corev1.NodeAddress{Type: corev1.NodeInternalIP, Address: a}
}

func TestPreferred(t *testing.T) {
	for _, tc := range []struct {
		name  string
		nodes []*corev1.Node
		want  []string
	}{
		{"internal only", []*corev1.Node{node(in("10.0.0.2"), in("fd00::2"))}, []string{"10.0.0.2", "fd00::2"}},
		{"external wins", []*corev1.Node{node(in("10.0.0.2"), ext("192.0.2.2"))}, []string{"192.0.2.2"}},
		{"one node's external wins for all", []*corev1.Node{node(in("10.0.0.1")), node(in("10.0.0.2"), ext("192.0.2.2"))}, []string{"192.0.2.2"}},
		{"sorted as addresses, deduplicated", []*corev1.Node{node(in("10.0.0.10"), in("9.0.0.1")), node(in("10.0.0.10"))}, []string{"9.0.0.1", "10.0.0.10"}},
		{"mapped unmapped, junk and host names skipped", []*corev1.Node{node(in("::ffff:10.0.0.3"), in("junk"),
			corev1.NodeAddress{Type: corev1.NodeHostName, Address: "10.9.9.9"})}, []string{"10.0.0.3"}},
		{"no nodes", nil, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got []string
			for _, a := range Preferred(tc.nodes...) {
				got = append(got, a.String())
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("got %v, want %v", got, tc.want)
			}
		})
	}
}
