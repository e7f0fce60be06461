package nodelabels

import (
	"slices"
	"testing"
)

func TestForbidden(t *testing.T) {
	for _, tc := range []struct {
		key       string
		forbidden bool
	}{
		{"team", false},
		{"example.com/rack", false},
		{"kubernetes.io/hostname", false},
		{"topology.kubernetes.io/zone", false},
		{"node.kubernetes.io/instance-type", false},
		{"node.kubernetes.io/exclude-from-external-load-balancers", false},
		{"kubelet.kubernetes.io/anything", false},
		{"sub.node.kubernetes.io/anything", false},
		{"node-restriction.kubernetes.io/pci", true},
		{"example.node-restriction.kubernetes.io/pci", true},
		{"node-role.kubernetes.io/control-plane", true},
		{"kubernetes.io/role", true},
		{"k8s.io/x", true},
		{"sig.k8s.io/x", true},
	} {
		t.Run(tc.key, func(t *testing.T) {
			got := len(Forbidden([]string{tc.key})) > 0
			if got != tc.forbidden {
				t.Errorf("got forbidden %v, want %v", got, tc.forbidden)
			}
		})
	}
}

func TestModified(t *testing.T) {
	got := Modified(map[string]string{"a": "1", "b": "2", "c": "3"}, map[string]string{"a": "1", "b": "x", "d": "4"})
	if want := []string{"b", "c", "d"}; !slices.Equal(got, want) {
		t.Errorf("got %v, want %v", got, want)
	}
}
