package agent

import (
	"strings"
	"testing"
)

// TestValidateNodeLabels: --node-labels that NodeRestriction would refuse
// stop the agent at start with a message naming them, instead of a Node
// that never registers.
func TestValidateNodeLabels(t *testing.T) {
	for _, tc := range []struct {
		name   string
		labels map[string]string
		want   string
	}{
		{"a zone and a team", map[string]string{"topology.kubernetes.io/zone": "a", "team": "x"}, ""},
		{"a node-restriction label", map[string]string{"node-restriction.kubernetes.io/pci": "yes"}, "may not set node-restriction.kubernetes.io/pci on itself"},
		{"a role", map[string]string{"node-role.kubernetes.io/worker": ""}, "node-role.kubernetes.io/worker"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := Options{NodeName: "n1", RootDir: t.TempDir(), NodeLabels: tc.labels}
			err := o.Validate()
			switch {
			case tc.want == "" && err != nil:
				t.Errorf("got %v, want accepted", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Errorf("got %v, want an error saying %q", err, tc.want)
			}
		})
	}
}
