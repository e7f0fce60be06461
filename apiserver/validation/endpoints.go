package validation

import (
	corev1 "k8s.io/api/core/v1"
	apimachineryvalidation "k8s.io/apimachinery/pkg/api/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// ValidateEndpoints validates a new Endpoints object.
func ValidateEndpoints(ep *corev1.Endpoints) field.ErrorList {
	return validateEndpoints(ep, nil)
}

// ValidateEndpointsUpdate validates an update of an Endpoints object.
// Addresses may move between nodes (an IP or pod CIDR can be reused), so
// nodeName changes are allowed.
func ValidateEndpointsUpdate(newEp, oldEp *corev1.Endpoints) field.ErrorList {
	errs := ValidateObjectMetaUpdateFor("Endpoints", &newEp.ObjectMeta, &oldEp.ObjectMeta)
	return append(errs, validateEndpoints(newEp, oldEp)...)
}

func validateEndpoints(ep, old *corev1.Endpoints) field.ErrorList {
	errs := ValidateObjectMetaFor("Endpoints", &ep.ObjectMeta, true)
	var oldIPs []string
	if old != nil {
		oldIPs = endpointsIPs(old)
	}
	subsetsPath := field.NewPath("subsets")
	for i := range ep.Subsets {
		errs = append(errs, validateEndpointSubset(&ep.Subsets[i], oldIPs, subsetsPath.Index(i))...)
	}
	return errs
}

func endpointsIPs(ep *corev1.Endpoints) []string {
	var ips []string
	for _, ss := range ep.Subsets {
		for _, a := range ss.Addresses {
			ips = append(ips, a.IP)
		}
		for _, a := range ss.NotReadyAddresses {
			ips = append(ips, a.IP)
		}
	}
	return ips
}

func validateEndpointSubset(ss *corev1.EndpointSubset, oldIPs []string, idxPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	// Ports may be empty (headless services) but addresses may not.
	if len(ss.Addresses) == 0 && len(ss.NotReadyAddresses) == 0 {
		errs = append(errs, field.Required(idxPath, "must specify `addresses` or `notReadyAddresses`"))
	}
	for i := range ss.Addresses {
		errs = append(errs, validateEndpointAddress(&ss.Addresses[i], oldIPs, idxPath.Child("addresses").Index(i))...)
	}
	for i := range ss.NotReadyAddresses {
		errs = append(errs, validateEndpointAddress(&ss.NotReadyAddresses[i], oldIPs, idxPath.Child("notReadyAddresses").Index(i))...)
	}
	for i := range ss.Ports {
		errs = append(errs, validateEndpointPort(&ss.Ports[i], len(ss.Ports) > 1, idxPath.Child("ports").Index(i))...)
	}
	return errs
}

func validateEndpointAddress(addr *corev1.EndpointAddress, oldIPs []string, fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	ipPath := fldPath.Child("ip")
	if ipErrs := validateLegacyIP(ipPath, addr.IP, oldIPs); len(ipErrs) > 0 {
		errs = append(errs, ipErrs...)
	} else {
		errs = append(errs, ValidateNonSpecialIP(addr.IP, ipPath)...)
	}
	if addr.Hostname != "" {
		errs = append(errs, validateDNS1123Label(addr.Hostname, fldPath.Child("hostname"))...)
	}
	if addr.NodeName != nil {
		errs = append(errs, msgsToErrs(fldPath.Child("nodeName"), *addr.NodeName, apimachineryvalidation.NameIsDNSSubdomain(*addr.NodeName, false))...)
	}
	return errs
}

func validateEndpointPort(port *corev1.EndpointPort, requireName bool, fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	switch {
	case requireName && port.Name == "":
		errs = append(errs, field.Required(fldPath.Child("name"), ""))
	case port.Name != "":
		errs = append(errs, validateDNS1123Label(port.Name, fldPath.Child("name"))...)
	}
	errs = append(errs, validatePortNum(int(port.Port), fldPath.Child("port"))...)
	errs = append(errs, validateProtocol(port.Protocol, fldPath.Child("protocol"))...)
	if port.AppProtocol != nil {
		errs = append(errs, validateQualifiedName(*port.AppProtocol, fldPath.Child("appProtocol"))...)
	}
	return errs
}
