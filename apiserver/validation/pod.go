package validation

import (
	"fmt"
	"math"
	"reflect"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apimachineryvalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	utilvalidation "k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// Pod DNS limits, from libc's resolver.
const (
	maxDNSNameservers     = 3
	maxDNSSearchPaths     = 32
	maxDNSSearchListChars = 2048
)

var (
	supportedPullPolicies        = []corev1.PullPolicy{corev1.PullAlways, corev1.PullIfNotPresent, corev1.PullNever}
	supportedTerminationPolicies = []corev1.TerminationMessagePolicy{corev1.TerminationMessageReadFile, corev1.TerminationMessageFallbackToLogsOnError}
	supportedRestartPolicies     = []corev1.RestartPolicy{corev1.RestartPolicyAlways, corev1.RestartPolicyOnFailure, corev1.RestartPolicyNever}
	supportedDNSPolicies         = []corev1.DNSPolicy{corev1.DNSClusterFirstWithHostNet, corev1.DNSClusterFirst, corev1.DNSDefault, corev1.DNSNone}
	supportedHTTPSchemes         = []corev1.URIScheme{corev1.URISchemeHTTP, corev1.URISchemeHTTPS}
)

// ValidatePod validates a new Pod: metadata and the parts of the spec
// Portal relies on (containers, their ports and probes, volumes names,
// policies, DNS, host names, node and service account names). Scheduling
// and security fields (affinity, tolerations, security contexts,
// resources) are not checked yet.
func ValidatePod(pod *corev1.Pod) field.ErrorList {
	errs := ValidateObjectMetaFor("Pod", &pod.ObjectMeta, true)
	return append(errs, validatePodSpec(&pod.Spec, field.NewPath("spec"))...)
}

func validatePodSpec(spec *corev1.PodSpec, specPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	if spec.TerminationGracePeriodSeconds == nil {
		errs = append(errs, field.Required(specPath.Child("terminationGracePeriodSeconds"), ""))
	}
	errs = append(errs, validateVolumeNames(spec.Volumes, specPath.Child("volumes"))...)
	errs = append(errs, validateContainers(spec.Containers, specPath.Child("containers"))...)
	errs = append(errs, validateInitContainers(spec.InitContainers, spec.Containers, specPath.Child("initContainers"))...)
	errs = append(errs, validateHostNetworkPorts(spec, specPath)...)
	errs = append(errs, validateEnum(spec.RestartPolicy, supportedRestartPolicies, specPath.Child("restartPolicy"))...)
	errs = append(errs, validateEnum(spec.DNSPolicy, supportedDNSPolicies, specPath.Child("dnsPolicy"))...)
	errs = append(errs, metav1validation.ValidateLabels(spec.NodeSelector, specPath.Child("nodeSelector"))...)
	errs = append(errs, validatePodDNSConfig(spec.DNSConfig, spec.DNSPolicy, specPath.Child("dnsConfig"))...)
	return append(errs, validatePodNames(spec, specPath)...)
}

// validateEnum is upstream's "required, then one of" check, which lists
// the allowed values in upstream's (unsorted) order.
func validateEnum[T ~string](v T, allowed []T, fldPath *field.Path) field.ErrorList {
	switch {
	case v == "":
		return field.ErrorList{field.Required(fldPath, "")}
	case !contains(allowed, v):
		return field.ErrorList{field.NotSupported(fldPath, v, allowed)}
	}
	return nil
}

func validatePodNames(spec *corev1.PodSpec, specPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	subdomain := func(name, child string) {
		if name != "" {
			errs = append(errs, msgsToErrs(specPath.Child(child), name, apimachineryvalidation.NameIsDNSSubdomain(name, false))...)
		}
	}
	subdomain(spec.ServiceAccountName, "serviceAccountName")
	subdomain(spec.NodeName, "nodeName")
	subdomain(spec.PriorityClassName, "priorityClassName")
	if d := spec.ActiveDeadlineSeconds; d != nil && (*d < 1 || *d > math.MaxInt32) {
		errs = append(errs, field.Invalid(specPath.Child("activeDeadlineSeconds"), *d, utilvalidation.InclusiveRangeError(1, math.MaxInt32)))
	}
	if spec.Hostname != "" {
		errs = append(errs, validateDNS1123Label(spec.Hostname, specPath.Child("hostname"))...)
	}
	if spec.Subdomain != "" {
		errs = append(errs, validateDNS1123Label(spec.Subdomain, specPath.Child("subdomain"))...)
	}
	for i, alias := range spec.HostAliases {
		aliasPath := specPath.Child("hostAliases").Index(i)
		errs = append(errs, validateLegacyIP(aliasPath.Child("ip"), alias.IP, nil)...)
		for j, h := range alias.Hostnames {
			errs = append(errs, validateDNS1123Subdomain(h, aliasPath.Child("hostnames").Index(j))...)
		}
	}
	return errs
}

// validateVolumeNames checks that each volume has a unique DNS-1123 label
// name and exactly one source; the sources themselves are not validated.
func validateVolumeNames(volumes []corev1.Volume, fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	names := map[string]bool{}
	for i := range volumes {
		v := &volumes[i]
		namePath := fldPath.Index(i).Child("name")
		switch {
		case v.Name == "":
			errs = append(errs, field.Required(namePath, ""))
		default:
			errs = append(errs, validateDNS1123Label(v.Name, namePath)...)
		}
		if names[v.Name] {
			errs = append(errs, field.Duplicate(namePath, v.Name))
		}
		names[v.Name] = true
		errs = append(errs, validateVolumeSourceCount(&v.VolumeSource, fldPath.Index(i))...)
	}
	return errs
}

func validateVolumeSourceCount(src *corev1.VolumeSource, fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	v, t := reflect.ValueOf(src).Elem(), reflect.TypeOf(*src)
	count := 0
	for i := 0; i < v.NumField(); i++ {
		if v.Field(i).Kind() != reflect.Pointer || v.Field(i).IsNil() {
			continue
		}
		if count++; count > 1 {
			errs = append(errs, field.Forbidden(fldPath.Child(jsonName(t.Field(i))), "may not specify more than 1 volume type"))
		}
	}
	if count == 0 {
		errs = append(errs, field.Required(fldPath, "must specify a volume type"))
	}
	return errs
}

func jsonName(f reflect.StructField) string {
	name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
	return name
}

func validateContainers(containers []corev1.Container, fldPath *field.Path) field.ErrorList {
	if len(containers) == 0 {
		return field.ErrorList{field.Required(fldPath, "")}
	}
	var errs field.ErrorList
	names := map[string]bool{}
	for i := range containers {
		c, idxPath := &containers[i], fldPath.Index(i)
		errs = append(errs, validateContainerCommon(c, idxPath)...)
		if names[c.Name] {
			errs = append(errs, field.Duplicate(idxPath.Child("name"), c.Name))
		}
		names[c.Name] = true
		errs = append(errs, validateContainerProbes(c, idxPath, true)...)
		if c.RestartPolicy != nil {
			errs = append(errs, field.Forbidden(idxPath.Child("restartPolicy"), "may not be set for non-init containers"))
		}
	}
	return append(errs, validateHostPortConflicts(containers, fldPath)...)
}

func validateInitContainers(inits, regular []corev1.Container, fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	names := map[string]bool{}
	for _, c := range regular {
		names[c.Name] = true
	}
	for i := range inits {
		c, idxPath := &inits[i], fldPath.Index(i)
		errs = append(errs, validateContainerCommon(c, idxPath)...)
		sidecar := false
		if c.RestartPolicy != nil {
			if *c.RestartPolicy != corev1.ContainerRestartPolicyAlways {
				errs = append(errs, field.NotSupported(idxPath.Child("restartPolicy"), *c.RestartPolicy, []corev1.ContainerRestartPolicy{corev1.ContainerRestartPolicyAlways}))
			}
			sidecar = *c.RestartPolicy == corev1.ContainerRestartPolicyAlways
		}
		if names[c.Name] {
			errs = append(errs, field.Duplicate(idxPath.Child("name"), c.Name))
		} else if c.Name != "" {
			names[c.Name] = true
		}
		// Init containers run one at a time, so only conflicts within one count.
		errs = append(errs, validateHostPortConflicts(inits[i:i+1], fldPath)...)
		errs = append(errs, validateContainerProbes(c, idxPath, sidecar)...)
	}
	return errs
}

// validateContainerCommon holds the rules for every kind of container.
func validateContainerCommon(c *corev1.Container, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	if c.Name == "" {
		errs = append(errs, field.Required(path.Child("name"), ""))
	} else {
		errs = append(errs, validateDNS1123Label(c.Name, path.Child("name"))...)
	}
	if c.Image == "" {
		errs = append(errs, field.Required(path.Child("image"), ""))
	} else if len(c.Image) != len(strings.TrimSpace(c.Image)) {
		errs = append(errs, field.Invalid(path.Child("image"), c.Image, "must not have leading or trailing whitespace"))
	}
	errs = append(errs, validateEnum(c.TerminationMessagePolicy, supportedTerminationPolicies, path.Child("terminationMessagePolicy"))...)
	errs = append(errs, validateContainerPorts(c.Ports, path.Child("ports"))...)
	return append(errs, validateEnum(c.ImagePullPolicy, supportedPullPolicies, path.Child("imagePullPolicy"))...)
}

// validateContainerPorts: port names are IANA_SVC_NAMEs unique within the
// container (upstream does not compare names across containers).
func validateContainerPorts(ports []corev1.ContainerPort, fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	names := map[string]bool{}
	for i, p := range ports {
		idxPath := fldPath.Index(i)
		if p.Name != "" {
			if msgs := utilvalidation.IsValidPortName(p.Name); len(msgs) != 0 {
				errs = append(errs, msgsToErrs(idxPath.Child("name"), p.Name, msgs)...)
			} else if names[p.Name] {
				errs = append(errs, field.Duplicate(idxPath.Child("name"), p.Name))
			}
			names[p.Name] = true
		}
		if p.ContainerPort == 0 {
			errs = append(errs, field.Required(idxPath.Child("containerPort"), ""))
		} else {
			errs = append(errs, msgsToErrs(idxPath.Child("containerPort"), p.ContainerPort, utilvalidation.IsValidPortNum(int(p.ContainerPort)))...)
		}
		if p.HostPort != 0 {
			errs = append(errs, msgsToErrs(idxPath.Child("hostPort"), p.HostPort, utilvalidation.IsValidPortNum(int(p.HostPort)))...)
		}
		errs = append(errs, validateProtocol(p.Protocol, idxPath.Child("protocol"))...)
	}
	return errs
}

// validateHostPortConflicts rejects two ports claiming the same
// protocol/hostIP/hostPort.
func validateHostPortConflicts(containers []corev1.Container, fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	seen := map[string]bool{}
	for ci, c := range containers {
		for pi, p := range c.Ports {
			if p.HostPort == 0 {
				continue
			}
			key := fmt.Sprintf("%s/%s/%d", p.Protocol, p.HostIP, p.HostPort)
			if seen[key] {
				errs = append(errs, field.Duplicate(fldPath.Index(ci).Child("ports").Index(pi).Child("hostPort"), key))
			}
			seen[key] = true
		}
	}
	return errs
}

// validateHostNetworkPorts: under hostNetwork a Pod's hostPort must equal
// its containerPort.
func validateHostNetworkPorts(spec *corev1.PodSpec, specPath *field.Path) field.ErrorList {
	if !spec.HostNetwork {
		return nil
	}
	var errs field.ErrorList
	for i, c := range spec.Containers {
		for j, p := range c.Ports {
			if p.HostPort != p.ContainerPort {
				path := specPath.Child("containers").Index(i).Child("ports").Index(j).Child("hostPort")
				errs = append(errs, field.Invalid(path, p.HostPort, "must match `containerPort` when `hostNetwork` is true"))
			}
		}
	}
	return errs
}
