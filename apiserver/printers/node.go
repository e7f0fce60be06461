package printers

import (
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

const (
	// nodeRoleLabelPrefix marks a role by key: node-role.kubernetes.io/<role>.
	nodeRoleLabelPrefix = "node-role.kubernetes.io/"
	// nodeRoleLabel is the older form that marks a role by value.
	nodeRoleLabel = "kubernetes.io/role"
)

var nodePrinter = printer[*corev1.Node]{
	columns: []metav1.TableColumnDefinition{
		nameColumn,
		column("Status", "string", "The status of the node"),
		column("Roles", "string", "The roles of the node"),
		ageColumn,
		column("Version", "string", corev1.NodeSystemInfo{}.SwaggerDoc()["kubeletVersion"]),
		wideColumn("Internal-IP", "string", corev1.NodeStatus{}.SwaggerDoc()["addresses"]),
		wideColumn("External-IP", "string", corev1.NodeStatus{}.SwaggerDoc()["addresses"]),
		wideColumn("OS-Image", "string", corev1.NodeSystemInfo{}.SwaggerDoc()["osImage"]),
		wideColumn("Kernel-Version", "string", corev1.NodeSystemInfo{}.SwaggerDoc()["kernelVersion"]),
		wideColumn("Container-Runtime", "string", corev1.NodeSystemInfo{}.SwaggerDoc()["containerRuntimeVersion"]),
	},
	cells: nodeCells,
}

func nodeCells(node *corev1.Node) []any {
	info := node.Status.NodeInfo
	return []any{
		node.Name,
		nodeStatus(node),
		noneIfEmpty(strings.Join(nodeRoles(node), ",")),
		age(node.CreationTimestamp),
		info.KubeletVersion,
		nodeAddress(node, corev1.NodeInternalIP),
		nodeAddress(node, corev1.NodeExternalIP),
		unknownIfEmpty(info.OSImage),
		unknownIfEmpty(info.KernelVersion),
		unknownIfEmpty(info.ContainerRuntimeVersion),
	}
}

// nodeStatus renders the Ready condition ("Ready", "NotReady", or "Unknown"
// when the node never reported one), plus ",SchedulingDisabled" for a
// cordoned node.
func nodeStatus(node *corev1.Node) string {
	status := "Unknown"
	// The last Ready condition wins, as upstream indexes them by type.
	for _, c := range node.Status.Conditions {
		if c.Type != corev1.NodeReady {
			continue
		}
		status = "Not" + string(corev1.NodeReady)
		if c.Status == corev1.ConditionTrue {
			status = string(corev1.NodeReady)
		}
	}
	if node.Spec.Unschedulable {
		status += ",SchedulingDisabled"
	}
	return status
}

// nodeRoles returns the node's roles, sorted and without duplicates.
func nodeRoles(node *corev1.Node) []string {
	var roles []string
	for k, v := range node.Labels {
		switch {
		case strings.HasPrefix(k, nodeRoleLabelPrefix):
			if role := strings.TrimPrefix(k, nodeRoleLabelPrefix); role != "" {
				roles = append(roles, role)
			}
		case k == nodeRoleLabel && v != "":
			roles = append(roles, v)
		}
	}
	slices.Sort(roles)
	return slices.Compact(roles)
}

// nodeAddress returns the node's first address of type t, or "<none>".
func nodeAddress(node *corev1.Node, t corev1.NodeAddressType) string {
	for _, a := range node.Status.Addresses {
		if a.Type == t {
			return a.Address
		}
	}
	return "<none>"
}

// unknownIfEmpty returns s, or "<unknown>" when s is empty.
func unknownIfEmpty(s string) string {
	if s == "" {
		return "<unknown>"
	}
	return s
}
