package validation

import (
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apimachineryvalidation "k8s.io/apimachinery/pkg/api/validation"
	"k8s.io/apimachinery/pkg/util/intstr"
	utilvalidation "k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

const notForInitContainers = "may not be set for init containers without restartPolicy=Always"

// validateContainerProbes checks lifecycle hooks and probes; allowed is
// false for init containers that are not sidecars, which may have none.
func validateContainerProbes(c *corev1.Container, path *field.Path, allowed bool) field.ErrorList {
	var errs field.ErrorList
	if !allowed {
		if c.Lifecycle != nil {
			errs = append(errs, field.Forbidden(path.Child("lifecycle"), notForInitContainers))
		}
		for name, p := range map[string]*corev1.Probe{"livenessProbe": c.LivenessProbe, "readinessProbe": c.ReadinessProbe, "startupProbe": c.StartupProbe} {
			if p != nil {
				errs = append(errs, field.Forbidden(path.Child(name), notForInitContainers))
			}
		}
		return errs
	}
	if c.Lifecycle != nil {
		errs = append(errs, validateLifecycle(c.Lifecycle, path.Child("lifecycle"))...)
	}
	errs = append(errs, validateProbe(c.LivenessProbe, path.Child("livenessProbe"), true)...)
	if p := c.ReadinessProbe; p != nil {
		errs = append(errs, validateProbe(p, path.Child("readinessProbe"), false)...)
		if p.TerminationGracePeriodSeconds != nil {
			errs = append(errs, field.Invalid(path.Child("readinessProbe", "terminationGracePeriodSeconds"), p.TerminationGracePeriodSeconds, "must not be set for readinessProbes"))
		}
	}
	return append(errs, validateProbe(c.StartupProbe, path.Child("startupProbe"), true)...)
}

func validateProbe(p *corev1.Probe, path *field.Path, successMustBeOne bool) field.ErrorList {
	if p == nil {
		return nil
	}
	h := p.ProbeHandler
	errs := validateHandler(handler{exec: h.Exec, httpGet: h.HTTPGet, tcpSocket: h.TCPSocket, grpc: h.GRPC}, path)
	for name, v := range map[string]int32{
		"initialDelaySeconds": p.InitialDelaySeconds, "timeoutSeconds": p.TimeoutSeconds, "periodSeconds": p.PeriodSeconds,
		"successThreshold": p.SuccessThreshold, "failureThreshold": p.FailureThreshold,
	} {
		errs = append(errs, apimachineryvalidation.ValidateNonnegativeField(int64(v), path.Child(name))...)
	}
	if g := p.TerminationGracePeriodSeconds; g != nil && *g <= 0 {
		errs = append(errs, field.Invalid(path.Child("terminationGracePeriodSeconds"), *g, "must be greater than 0"))
	}
	if successMustBeOne && p.SuccessThreshold != 1 {
		errs = append(errs, field.Invalid(path.Child("successThreshold"), p.SuccessThreshold, "must be 1"))
	}
	return errs
}

func validateLifecycle(l *corev1.Lifecycle, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	for name, h := range map[string]*corev1.LifecycleHandler{"postStart": l.PostStart, "preStop": l.PreStop} {
		if h != nil {
			errs = append(errs, validateHandler(handler{exec: h.Exec, httpGet: h.HTTPGet, tcpSocket: h.TCPSocket, sleep: h.Sleep}, path.Child(name))...)
		}
	}
	return errs
}

// handler is the union of probe and lifecycle actions; exactly one must be
// set.
type handler struct {
	exec      *corev1.ExecAction
	httpGet   *corev1.HTTPGetAction
	tcpSocket *corev1.TCPSocketAction
	grpc      *corev1.GRPCAction
	sleep     *corev1.SleepAction
}

func validateHandler(h handler, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	count := 0
	one := func(set bool, name string, check func() field.ErrorList) {
		if !set {
			return
		}
		if count++; count > 1 {
			errs = append(errs, field.Forbidden(path.Child(name), "may not specify more than 1 handler type"))
			return
		}
		errs = append(errs, check()...)
	}
	one(h.exec != nil, "exec", func() field.ErrorList {
		if len(h.exec.Command) == 0 {
			return field.ErrorList{field.Required(path.Child("exec", "command"), "")}
		}
		return nil
	})
	one(h.httpGet != nil, "httpGet", func() field.ErrorList { return validateHTTPGet(h.httpGet, path.Child("httpGet")) })
	one(h.tcpSocket != nil, "tcpSocket", func() field.ErrorList {
		return validatePortNumOrName(h.tcpSocket.Port, path.Child("tcpSocket", "port"))
	})
	one(h.grpc != nil, "grpc", func() field.ErrorList {
		return validatePortNumOrName(intstr.FromInt32(h.grpc.Port), path.Child("grpc", "port"))
	})
	one(h.sleep != nil, "sleep", func() field.ErrorList { return nil })
	if count == 0 {
		errs = append(errs, field.Required(path, "must specify a handler type"))
	}
	return errs
}

func validateHTTPGet(h *corev1.HTTPGetAction, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	if h.Path == "" {
		errs = append(errs, field.Required(path.Child("path"), ""))
	}
	errs = append(errs, validatePortNumOrName(h.Port, path.Child("port"))...)
	if !contains(supportedHTTPSchemes, h.Scheme) {
		errs = append(errs, field.NotSupported(path.Child("scheme"), h.Scheme, supportedHTTPSchemes))
	}
	for _, hdr := range h.HTTPHeaders {
		errs = append(errs, msgsToErrs(path.Child("httpHeaders"), hdr.Name, utilvalidation.IsHTTPHeaderName(hdr.Name))...)
	}
	return errs
}

// validatePodDNSConfig checks spec.dnsConfig, which dnsPolicy None
// requires. Search domains follow the relaxed rule (underscores and a lone
// "." allowed) that is the upstream default.
func validatePodDNSConfig(cfg *corev1.PodDNSConfig, policy corev1.DNSPolicy, path *field.Path) field.ErrorList {
	if policy == corev1.DNSNone {
		if cfg == nil {
			return field.ErrorList{field.Required(path, fmt.Sprintf("must provide `dnsConfig` when `dnsPolicy` is %s", corev1.DNSNone))}
		}
		if len(cfg.Nameservers) == 0 {
			return field.ErrorList{field.Required(path.Child("nameservers"), fmt.Sprintf("must provide at least one DNS nameserver when `dnsPolicy` is %s", corev1.DNSNone))}
		}
	}
	if cfg == nil {
		return nil
	}
	var errs field.ErrorList
	if len(cfg.Nameservers) > maxDNSNameservers {
		errs = append(errs, field.Invalid(path.Child("nameservers"), cfg.Nameservers, fmt.Sprintf("must not have more than %v nameservers", maxDNSNameservers)))
	}
	for i, ns := range cfg.Nameservers {
		errs = append(errs, validateLegacyIP(path.Child("nameservers").Index(i), ns, nil)...)
	}
	errs = append(errs, validateDNSSearches(cfg.Searches, path.Child("searches"))...)
	for i, o := range cfg.Options {
		if o.Name == "" {
			errs = append(errs, field.Required(path.Child("options").Index(i), "must not be empty"))
		}
	}
	return errs
}

func validateDNSSearches(searches []string, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	if len(searches) > maxDNSSearchPaths {
		errs = append(errs, field.Invalid(path, searches, fmt.Sprintf("must not have more than %v search paths", maxDNSSearchPaths)))
	}
	// The limit counts the spaces between entries, as in resolv.conf.
	if len(strings.Join(searches, " ")) > maxDNSSearchListChars {
		errs = append(errs, field.Invalid(path, searches, fmt.Sprintf("must not have more than %v characters (including spaces) in the search list", maxDNSSearchListChars)))
	}
	for i, s := range searches {
		if s == "." {
			continue
		}
		s = strings.TrimSuffix(s, ".")
		errs = append(errs, msgsToErrs(path.Index(i), s, utilvalidation.IsDNS1123SubdomainWithUnderscore(s))...)
	}
	return errs
}
