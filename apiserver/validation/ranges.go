package validation

import (
	"fmt"
	"net/netip"

	"k8s.io/apimachinery/pkg/util/validation/field"

	"portal.dev/portal/apiserver/svcconfig"
)

// IPNotInRangeError is the allocator's refusal of a requested cluster IP
// outside the configured range of its family; its text is upstream's
// ipallocator.ErrNotInRange.
type IPNotInRangeError struct {
	IP         netip.Addr
	ValidRange string
}

// Error returns upstream's message.
func (e *IPNotInRangeError) Error() string {
	return fmt.Sprintf("the provided IP (%v) is not in the valid range. The range of valid IPs is %s", e.IP, e.ValidRange)
}

// PortNotInRangeError is the allocator's refusal of a requested node port
// outside the NodePort range; its text is upstream's
// portallocator.ErrNotInRange.
type PortNotInRangeError struct {
	ValidPorts string
}

// Error returns upstream's message.
func (e *PortNotInRangeError) Error() string {
	return fmt.Sprintf("provided port is not in the valid range. The range of valid ports is %s", e.ValidPorts)
}

// ClusterIPInRange returns nil when ip lies in the cluster's Service range of
// its family, and an *IPNotInRangeError otherwise (including when the
// cluster has no range of that family). Range checks are the allocator's
// job upstream, not validation's; this lets Portal's allocator report them
// identically.
func ClusterIPInRange(ip netip.Addr, cfg ServiceConfig) error {
	ip = ip.Unmap()
	prefix, ok := cfg.RangeFor(svcconfig.FamilyOfAddr(ip))
	if ok && prefix.Contains(ip) {
		return nil
	}
	valid := ""
	if ok {
		valid = prefix.String()
	}
	return &IPNotInRangeError{IP: ip, ValidRange: valid}
}

// ClusterIPAllocationError wraps an allocator error for a requested cluster
// IP the way upstream's registry reports it: Invalid on spec.clusterIPs with
// the whole list as the value.
func ClusterIPAllocationError(clusterIPs []string, ip string, err error) *field.Error {
	return field.Invalid(field.NewPath("spec", "clusterIPs"), clusterIPs, fmt.Sprintf("failed to allocate IP %v: %v", ip, err))
}

// NodePortInRange returns nil when port lies in the cluster's NodePort range
// and a *PortNotInRangeError otherwise.
func NodePortInRange(port int, cfg ServiceConfig) error {
	r := cfg.NodePortRange.OrDefault()
	if r.Contains(port) {
		return nil
	}
	return &PortNotInRangeError{ValidPorts: r.String()}
}

// NodePortAllocationError wraps an allocator error for the node port
// requested by spec.ports[index] as upstream's registry reports it.
func NodePortAllocationError(index int, nodePort int32, err error) *field.Error {
	return field.Invalid(field.NewPath("spec", "ports").Index(index).Child("nodePort"), nodePort, err.Error())
}
