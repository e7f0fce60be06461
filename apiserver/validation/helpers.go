package validation

import (
	"fmt"
	"net/netip"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/validate/content"
	"k8s.io/apimachinery/pkg/util/intstr"
	utilvalidation "k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
	netutils "k8s.io/utils/net"
)

// strictIPValidation mirrors upstream's StrictIPCIDRValidation feature gate,
// which is on by default since 1.36: legacy IP fields reject leading zeros and
// IPv4-mapped IPv6, but still accept non-canonical IPv6 text.
const strictIPValidation = true

// supportedPortProtocols is upstream's list, already in the sorted order
// field.NotSupported reports it.
var supportedPortProtocols = []corev1.Protocol{corev1.ProtocolSCTP, corev1.ProtocolTCP, corev1.ProtocolUDP}

func isSupportedProtocol(p corev1.Protocol) bool {
	for _, s := range supportedPortProtocols {
		if p == s {
			return true
		}
	}
	return false
}

// msgsToErrs turns the []string messages of the util/validation predicates
// into Invalid errors on one field.
func msgsToErrs(fldPath *field.Path, value any, msgs []string) field.ErrorList {
	var errs field.ErrorList
	for _, msg := range msgs {
		errs = append(errs, field.Invalid(fldPath, value, msg))
	}
	return errs
}

func validateDNS1123Label(value string, fldPath *field.Path) field.ErrorList {
	return msgsToErrs(fldPath, value, utilvalidation.IsDNS1123Label(value))
}

func validateDNS1123Subdomain(value string, fldPath *field.Path) field.ErrorList {
	return msgsToErrs(fldPath, value, utilvalidation.IsDNS1123Subdomain(value))
}

func validateQualifiedName(value string, fldPath *field.Path) field.ErrorList {
	return msgsToErrs(fldPath, value, content.IsQualifiedName(value))
}

// validateLegacyIP checks an IP field that predates strict IP validation;
// values already present in the old object are accepted unchanged
// (validation ratcheting), as upstream does.
func validateLegacyIP(fldPath *field.Path, value string, validOld []string) field.ErrorList {
	return utilvalidation.IsValidIPForLegacyField(fldPath, value, strictIPValidation, validOld)
}

// validateLegacyCIDR is validateLegacyIP for CIDR fields.
func validateLegacyCIDR(fldPath *field.Path, value string, validOld []string) field.ErrorList {
	return utilvalidation.IsValidCIDRForLegacyField(fldPath, value, strictIPValidation, validOld)
}

// ValidateNonSpecialIP rejects addresses that make no sense as a Service or
// endpoint destination: unspecified and loopback addresses, and link-local
// ones, which tend to be node-local services such as cloud metadata. It is
// upstream's check for Endpoints, EndpointSlices and externalIPs.
func ValidateNonSpecialIP(ipAddress string, fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	ip := netutils.ParseIPSloppy(ipAddress)
	if ip == nil {
		return append(errs, field.Invalid(fldPath, ipAddress, "must be a valid IP address"))
	}
	if ip.IsUnspecified() {
		errs = append(errs, field.Invalid(fldPath, ipAddress, fmt.Sprintf("may not be unspecified (%v)", ipAddress)))
	}
	if ip.IsLoopback() {
		errs = append(errs, field.Invalid(fldPath, ipAddress, "may not be in the loopback range (127.0.0.0/8, ::1/128)"))
	}
	if ip.IsLinkLocalUnicast() {
		errs = append(errs, field.Invalid(fldPath, ipAddress, "may not be in the link-local range (169.254.0.0/16, fe80::/10)"))
	}
	if ip.IsLinkLocalMulticast() {
		errs = append(errs, field.Invalid(fldPath, ipAddress, "may not be in the link-local multicast range (224.0.0.0/24, ff02::/10)"))
	}
	return errs
}

// validatePortNumOrName checks a port given as a number (1-65535) or as an
// IANA_SVC_NAME.
func validatePortNumOrName(port intstr.IntOrString, fldPath *field.Path) field.ErrorList {
	switch port.Type {
	case intstr.Int:
		return msgsToErrs(fldPath, port.IntValue(), utilvalidation.IsValidPortNum(port.IntValue()))
	case intstr.String:
		return msgsToErrs(fldPath, port.StrVal, utilvalidation.IsValidPortName(port.StrVal))
	default:
		return field.ErrorList{field.InternalError(fldPath, fmt.Errorf("unknown type: %v", port.Type))}
	}
}

func validatePortNum(port int, fldPath *field.Path) field.ErrorList {
	return msgsToErrs(fldPath, port, utilvalidation.IsValidPortNum(port))
}

// ipFamilyOf returns the family of a textual IP, or "" when it does not
// parse (even sloppily).
func ipFamilyOf(ip string) corev1.IPFamily {
	parsed := netutils.ParseIPSloppy(ip)
	switch {
	case parsed == nil:
		return ""
	case parsed.To4() != nil:
		return corev1.IPv4Protocol
	default:
		return corev1.IPv6Protocol
	}
}

// parseAddr parses an IP as leniently as the legacy fields allow.
func parseAddr(ip string) (netip.Addr, bool) {
	parsed := netutils.ParseIPSloppy(ip)
	if parsed == nil {
		return netip.Addr{}, false
	}
	addr, ok := netip.AddrFromSlice(parsed)
	return addr.Unmap(), ok
}

func deref[T any](p *T) T {
	var zero T
	if p == nil {
		return zero
	}
	return *p
}
