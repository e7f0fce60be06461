package validation

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	utilvalidation "k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// internalServicePort mirrors the field order of upstream's internal
// core.ServicePort, which upstream uses as the bad value of duplicate-port
// errors; reporting the same shape keeps the message byte-for-byte equal.
type internalServicePort struct {
	Name        string
	Protocol    corev1.Protocol
	AppProtocol *string
	Port        int32
	TargetPort  intstr.IntOrString
	NodePort    int32
}

func validateServicePorts(svc *corev1.Service) field.ErrorList {
	var errs field.ErrorList
	portsPath := field.NewPath("spec", "ports")
	names := map[string]bool{}
	for i := range svc.Spec.Ports {
		errs = append(errs, validateServicePort(&svc.Spec.Ports[i], len(svc.Spec.Ports) > 1, names, portsPath.Index(i))...)
	}
	if svc.Spec.Type == corev1.ServiceTypeClusterIP {
		for i, p := range svc.Spec.Ports {
			if p.NodePort != 0 {
				errs = append(errs, field.Forbidden(portsPath.Index(i).Child("nodePort"), "may not be used when `type` is 'ClusterIP'"))
			}
		}
	}
	errs = append(errs, validateUniqueNodePorts(svc.Spec.Ports, portsPath)...)
	return append(errs, validateUniquePorts(svc.Spec.Ports, portsPath)...)
}

func validateServicePort(sp *corev1.ServicePort, requireName bool, names map[string]bool, fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	switch {
	case requireName && sp.Name == "":
		errs = append(errs, field.Required(fldPath.Child("name"), ""))
	case sp.Name != "":
		errs = append(errs, validateDNS1123Label(sp.Name, fldPath.Child("name"))...)
		if names[sp.Name] {
			errs = append(errs, field.Duplicate(fldPath.Child("name"), sp.Name))
		}
		names[sp.Name] = true
	}
	errs = append(errs, msgsToErrs(fldPath.Child("port"), sp.Port, utilvalidation.IsValidPortNum(int(sp.Port)))...)
	errs = append(errs, validateProtocol(sp.Protocol, fldPath.Child("protocol"))...)
	errs = append(errs, validatePortNumOrName(sp.TargetPort, fldPath.Child("targetPort"))...)
	if sp.AppProtocol != nil {
		errs = append(errs, validateQualifiedName(*sp.AppProtocol, fldPath.Child("appProtocol"))...)
	}
	return errs
}

func validateProtocol(p corev1.Protocol, fldPath *field.Path) field.ErrorList {
	switch {
	case p == "":
		return field.ErrorList{field.Required(fldPath, "")}
	case !isSupportedProtocol(p):
		return field.ErrorList{field.NotSupported(fldPath, p, supportedPortProtocols)}
	}
	return nil
}

// validateUniqueNodePorts rejects the same nodePort twice for one protocol.
func validateUniqueNodePorts(ports []corev1.ServicePort, portsPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	type key struct {
		proto corev1.Protocol
		port  int32
	}
	seen := map[key]bool{}
	for i, p := range ports {
		if p.NodePort == 0 {
			continue
		}
		k := key{p.Protocol, p.NodePort}
		if seen[k] {
			errs = append(errs, field.Duplicate(portsPath.Index(i).Child("nodePort"), p.NodePort))
		}
		seen[k] = true
	}
	return errs
}

// validateUniquePorts rejects the same port twice for one protocol.
func validateUniquePorts(ports []corev1.ServicePort, portsPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	seen := map[internalServicePort]bool{}
	for i, p := range ports {
		k := internalServicePort{Protocol: p.Protocol, Port: p.Port}
		if seen[k] {
			errs = append(errs, field.Duplicate(portsPath.Index(i), k))
		}
		seen[k] = true
	}
	return errs
}
