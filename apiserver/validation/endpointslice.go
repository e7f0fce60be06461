package validation

import (
	"errors"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/api/validate/content"
	apimachineryvalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	utilvalidation "k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// EndpointSlice limits, as upstream's discovery validation sets them.
const (
	maxSliceEndpoints  = 1000
	maxSliceAddresses  = 100
	maxSlicePorts      = 20000
	maxTopologyLabels  = 16
	maxZoneHints       = 8
	maxNodeHints       = 8
	errReservedZoneKey = "reserved key was not removed in conversion"
)

var supportedAddressTypes = []discoveryv1.AddressType{
	discoveryv1.AddressTypeFQDN, discoveryv1.AddressTypeIPv4, discoveryv1.AddressTypeIPv6,
}

// ValidateEndpointSlice validates a new EndpointSlice.
func ValidateEndpointSlice(es *discoveryv1.EndpointSlice) field.ErrorList {
	return validateEndpointSlice(es, nil)
}

// ValidateEndpointSliceUpdate validates an update of an EndpointSlice; its
// addressType is immutable.
func ValidateEndpointSliceUpdate(newES, oldES *discoveryv1.EndpointSlice) field.ErrorList {
	errs := validateEndpointSlice(newES, oldES)
	return append(errs, apimachineryvalidation.ValidateImmutableField(newES.AddressType, oldES.AddressType, field.NewPath("addressType"))...)
}

func validateEndpointSlice(es, old *discoveryv1.EndpointSlice) field.ErrorList {
	errs := ValidateObjectMetaFor("EndpointSlice", &es.ObjectMeta, true)
	errs = append(errs, validateAddressType(es.AddressType)...)
	var oldAddrs []string
	if old != nil {
		for _, ep := range old.Endpoints {
			oldAddrs = append(oldAddrs, ep.Addresses...)
		}
	}
	errs = append(errs, validateSliceEndpoints(es.Endpoints, es.AddressType, oldAddrs, field.NewPath("endpoints"))...)
	return append(errs, validateSlicePorts(es.Ports, field.NewPath("ports"))...)
}

func validateAddressType(t discoveryv1.AddressType) field.ErrorList {
	path := field.NewPath("addressType")
	switch {
	case t == "":
		return field.ErrorList{field.Required(path, "")}
	case !contains(supportedAddressTypes, t):
		return field.ErrorList{field.NotSupported(path, t, supportedAddressTypes)}
	}
	return nil
}

func validateSliceEndpoints(endpoints []discoveryv1.Endpoint, addrType discoveryv1.AddressType, oldAddrs []string, fldPath *field.Path) field.ErrorList {
	if len(endpoints) > maxSliceEndpoints {
		return field.ErrorList{field.TooMany(fldPath, len(endpoints), maxSliceEndpoints)}
	}
	var errs field.ErrorList
	for i := range endpoints {
		errs = append(errs, validateSliceEndpoint(&endpoints[i], addrType, oldAddrs, fldPath.Index(i))...)
	}
	return errs
}

func validateSliceEndpoint(ep *discoveryv1.Endpoint, addrType discoveryv1.AddressType, oldAddrs []string, idxPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	addrPath := idxPath.Child("addresses")
	switch {
	case len(ep.Addresses) == 0:
		errs = append(errs, field.Required(addrPath, "must contain at least 1 address"))
	case len(ep.Addresses) > maxSliceAddresses:
		errs = append(errs, field.TooMany(addrPath, len(ep.Addresses), maxSliceAddresses))
	}
	for i, addr := range ep.Addresses {
		errs = append(errs, validateSliceAddress(addr, addrType, oldAddrs, addrPath.Index(i))...)
	}
	if ep.NodeName != nil {
		errs = append(errs, msgsToErrs(idxPath.Child("nodeName"), *ep.NodeName, apimachineryvalidation.NameIsDNSSubdomain(*ep.NodeName, false))...)
	}
	errs = append(errs, validateDeprecatedTopology(ep.DeprecatedTopology, idxPath.Child("deprecatedTopology"))...)
	if ep.Hostname != nil {
		errs = append(errs, validateDNS1123Label(*ep.Hostname, idxPath.Child("hostname"))...)
	}
	if ep.Hints != nil {
		errs = append(errs, validateHints(ep.Hints, idxPath.Child("hints"))...)
	}
	return errs
}

// validateSliceAddress checks one address against the slice's type; unknown
// types are left alone (validateAddressType reports them).
func validateSliceAddress(addr string, addrType discoveryv1.AddressType, oldAddrs []string, path *field.Path) field.ErrorList {
	var want corev1.IPFamily
	switch addrType {
	case discoveryv1.AddressTypeFQDN:
		return utilvalidation.IsFullyQualifiedDomainName(path, addr)
	case discoveryv1.AddressTypeIPv4:
		want = corev1.IPv4Protocol
	case discoveryv1.AddressTypeIPv6:
		want = corev1.IPv6Protocol
	default:
		return nil
	}
	if errs := validateLegacyIP(path, addr, oldAddrs); len(errs) > 0 {
		return errs
	}
	var errs field.ErrorList
	if ipFamilyOf(addr) != want {
		errs = append(errs, field.Invalid(path, addr, "must be an "+string(want)+" address"))
	}
	return append(errs, ValidateNonSpecialIP(addr, path)...)
}

func validateDeprecatedTopology(topology map[string]string, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	if len(topology) > maxTopologyLabels {
		errs = append(errs, field.TooMany(path, len(topology), maxTopologyLabels))
	}
	errs = append(errs, metav1validation.ValidateLabels(topology, path)...)
	// The zone has its own field; v1beta1 conversion moved it out of the map.
	if _, found := topology[corev1.LabelTopologyZone]; found {
		errs = append(errs, field.InternalError(path.Key(corev1.LabelTopologyZone), errors.New(errReservedZoneKey)))
	}
	return errs
}

func validateHints(hints *discoveryv1.EndpointHints, fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	zonesPath := fldPath.Child("forZones")
	if len(hints.ForZones) > maxZoneHints {
		return append(errs, field.TooMany(zonesPath, len(hints.ForZones), maxZoneHints))
	}
	zones := map[string]bool{}
	for i, z := range hints.ForZones {
		p := zonesPath.Index(i).Child("name")
		if zones[z.Name] {
			errs = append(errs, field.Duplicate(p, z.Name))
		}
		zones[z.Name] = true
		errs = append(errs, msgsToErrs(p, z.Name, content.IsLabelValue(z.Name))...)
	}
	nodesPath := fldPath.Child("forNodes")
	if len(hints.ForNodes) > maxNodeHints {
		return append(errs, field.TooMany(nodesPath, len(hints.ForNodes), maxNodeHints))
	}
	nodes := map[string]bool{}
	for i, n := range hints.ForNodes {
		p := nodesPath.Index(i).Child("name")
		if nodes[n.Name] {
			errs = append(errs, field.Duplicate(p, n.Name))
		}
		nodes[n.Name] = true
		errs = append(errs, msgsToErrs(p, n.Name, apimachineryvalidation.NameIsDNSSubdomain(n.Name, false))...)
	}
	return errs
}

func validateSlicePorts(ports []discoveryv1.EndpointPort, fldPath *field.Path) field.ErrorList {
	if len(ports) > maxSlicePorts {
		return field.ErrorList{field.TooMany(fldPath, len(ports), maxSlicePorts)}
	}
	var errs field.ErrorList
	names := map[string]bool{}
	for i, p := range ports {
		idxPath := fldPath.Index(i)
		// Defaulting sets a nil name to "".
		name := deref(p.Name)
		if name != "" {
			errs = append(errs, validateDNS1123Label(name, idxPath.Child("name"))...)
		}
		if names[name] {
			errs = append(errs, field.Duplicate(idxPath.Child("name"), name))
		}
		names[name] = true
		if p.Protocol == nil {
			errs = append(errs, field.Required(idxPath.Child("protocol"), ""))
		} else if !isSupportedProtocol(*p.Protocol) {
			errs = append(errs, field.NotSupported(idxPath.Child("protocol"), *p.Protocol, supportedPortProtocols))
		}
		if p.AppProtocol != nil {
			errs = append(errs, validateQualifiedName(*p.AppProtocol, idxPath.Child("appProtocol"))...)
		}
	}
	return errs
}
