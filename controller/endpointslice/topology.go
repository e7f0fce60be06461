package endpointslice

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// topology is an immutable snapshot of what reconcile needs from Nodes:
// which exist, their zones, and each zone's share of the allocatable CPU of
// the ready worker nodes (for topology-mode Auto). A nil *topology knows no
// Nodes.
type topology struct {
	zoneByNode map[string]string
	// cpuRatios is nil when the Nodes don't allow Auto hints: a ready
	// worker without a zone or CPU, or fewer than two zones.
	cpuRatios map[string]float64
}

// newTopology takes the snapshot of nodes.
func newTopology(nodes []*corev1.Node) *topology {
	t := &topology{zoneByNode: make(map[string]string, len(nodes))}
	for _, n := range nodes {
		t.zoneByNode[n.Name] = n.Labels[corev1.LabelTopologyZone]
	}
	t.cpuRatios = cpuRatios(nodes)
	return t
}

// node returns the zone of the named Node and whether it exists.
func (t *topology) node(name string) (zone string, ok bool) {
	if t == nil {
		return "", false
	}
	zone, ok = t.zoneByNode[name]
	return zone, ok
}

// cpuRatios mirrors upstream's TopologyCache.SetNodes: control-plane and
// not-ready nodes don't count; one counted node without zone or CPU makes
// the whole cluster unfit for Auto hints.
func cpuRatios(nodes []*corev1.Node) map[string]float64 {
	byZone := map[string]*resource.Quantity{}
	var total resource.Quantity
	for _, n := range nodes {
		if excludedNode(n) || !nodeReady(n) {
			continue
		}
		zone := n.Labels[corev1.LabelTopologyZone]
		cpu := n.Status.Allocatable.Cpu()
		if zone == "" || cpu.IsZero() {
			return nil
		}
		total.Add(*cpu)
		if q, ok := byZone[zone]; ok {
			q.Add(*cpu)
		} else {
			byZone[zone] = cpu
		}
	}
	if total.IsZero() || len(byZone) < 2 {
		return nil
	}
	ratios := make(map[string]float64, len(byZone))
	for zone, q := range byZone {
		ratios[zone] = float64(q.MilliValue()) / float64(total.MilliValue())
	}
	return ratios
}

func excludedNode(n *corev1.Node) bool {
	_, cp := n.Labels["node-role.kubernetes.io/control-plane"]
	_, master := n.Labels["node-role.kubernetes.io/master"]
	return cp || master
}

func nodeReady(n *corev1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}
