package validation

import (
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/api/validate/content"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	utilvalidation "k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

var supportedTaintEffects = []corev1.TaintEffect{corev1.TaintEffectNoSchedule, corev1.TaintEffectPreferNoSchedule, corev1.TaintEffectNoExecute}

// ValidateNode validates a new Node: metadata, taints, non-negative
// capacity and allocatable, and pod CIDRs (valid, at most one per family).
func ValidateNode(n *corev1.Node) field.ErrorList {
	return validateNode(n, nil)
}

func validateNode(n, old *corev1.Node) field.ErrorList {
	errs := ValidateObjectMetaFor("Node", &n.ObjectMeta, false)
	if len(n.Spec.Taints) > 0 {
		// Upstream roots this path at metadata; kept for fidelity.
		errs = append(errs, validateTaints(n.Spec.Taints, field.NewPath("metadata", "taints"))...)
	}
	errs = append(errs, validateNodeResources(n)...)
	var oldCIDRs []string
	if old != nil {
		oldCIDRs = nodePodCIDRs(old)
	}
	return append(errs, validatePodCIDRs(nodePodCIDRs(n), oldCIDRs)...)
}

// nodePodCIDRs returns the node's pod CIDRs; the singular field predates
// the list and stands for it when the list is empty.
func nodePodCIDRs(n *corev1.Node) []string {
	if len(n.Spec.PodCIDRs) == 0 && n.Spec.PodCIDR != "" {
		return []string{n.Spec.PodCIDR}
	}
	return n.Spec.PodCIDRs
}

func validatePodCIDRs(cidrs, oldCIDRs []string) field.ErrorList {
	var errs field.ErrorList
	path := field.NewPath("spec", "podCIDRs")
	for i, c := range cidrs {
		errs = append(errs, validateLegacyCIDR(path.Index(i), c, oldCIDRs)...)
	}
	if len(errs) > 0 || len(cidrs) < 2 {
		return errs
	}
	var ips []string
	for _, c := range cidrs {
		ip, _, _ := cutCIDR(c)
		ips = append(ips, ip)
	}
	if !isDualStackIPs(ips) || len(cidrs) > 2 {
		errs = append(errs, field.Invalid(path, cidrs, "may specify no more than one CIDR for each IP family"))
	}
	seen := map[string]bool{}
	for i, c := range cidrs {
		if seen[c] {
			errs = append(errs, field.Duplicate(path.Index(i), c))
		}
		seen[c] = true
	}
	return errs
}

func cutCIDR(c string) (ip, bits string, ok bool) {
	for i := 0; i < len(c); i++ {
		if c[i] == '/' {
			return c[:i], c[i+1:], true
		}
	}
	return c, "", false
}

func validateTaints(taints []corev1.Taint, fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	seen := map[corev1.TaintEffect]map[string]bool{}
	for i, taint := range taints {
		idxPath := fldPath.Index(i)
		errs = append(errs, metav1validation.ValidateLabelName(taint.Key, idxPath.Child("key"))...)
		if msgs := content.IsLabelValue(taint.Value); len(msgs) != 0 {
			errs = append(errs, field.Invalid(idxPath.Child("value"), taint.Value, joinMsgs(msgs)))
		}
		switch {
		case taint.Effect == "":
			errs = append(errs, field.Required(idxPath.Child("effect"), ""))
		case !contains(supportedTaintEffects, taint.Effect):
			errs = append(errs, field.NotSupported(idxPath.Child("effect"), taint.Effect, supportedTaintEffects))
		}
		if seen[taint.Effect][taint.Key] {
			dup := field.Duplicate(idxPath, taint)
			dup.Detail = "taints must be unique by key and effect pair"
			errs = append(errs, dup)
			continue
		}
		if seen[taint.Effect] == nil {
			seen[taint.Effect] = map[string]bool{}
		}
		seen[taint.Effect][taint.Key] = true
	}
	return errs
}

func joinMsgs(msgs []string) string {
	out := ""
	for i, m := range msgs {
		if i > 0 {
			out += ";"
		}
		out += m
	}
	return out
}

func validateNodeResources(n *corev1.Node) field.ErrorList {
	var errs field.ErrorList
	for name, q := range n.Status.Capacity {
		errs = append(errs, validateNonNegativeQuantity(q, field.NewPath("status", "capacity", string(name)))...)
	}
	for name, q := range n.Status.Allocatable {
		errs = append(errs, validateNonNegativeQuantity(q, field.NewPath("status", "allocatable", string(name)))...)
	}
	return errs
}

func validateNonNegativeQuantity(q resource.Quantity, fldPath *field.Path) field.ErrorList {
	if q.Sign() < 0 {
		return field.ErrorList{field.Invalid(fldPath, q.String(), "must be greater than or equal to 0")}
	}
	return nil
}

// ValidateNodeUpdate validates an update of a Node: pod CIDRs and
// providerID may only be set once, externalID never changes, and status
// addresses are unique.
func ValidateNodeUpdate(n, old *corev1.Node) field.ErrorList {
	errs := ValidateObjectMetaUpdateFor("Node", &n.ObjectMeta, &old.ObjectMeta)
	errs = append(errs, validateNode(n, old)...)
	seen := map[corev1.NodeAddress]bool{}
	for i, a := range n.Status.Addresses {
		if seen[a] {
			errs = append(errs, field.Duplicate(field.NewPath("status", "addresses").Index(i), a))
		}
		seen[a] = true
	}
	if oldCIDRs := nodePodCIDRs(old); len(oldCIDRs) > 0 && !slices.Equal(oldCIDRs, nodePodCIDRs(n)) {
		errs = append(errs, field.Forbidden(field.NewPath("spec", "podCIDRs"), `node updates may not change podCIDR except from "" to valid`))
	}
	if old.Spec.ProviderID != "" && old.Spec.ProviderID != n.Spec.ProviderID {
		errs = append(errs, field.Forbidden(field.NewPath("spec", "providerID"), `node updates may not change providerID except from "" to valid`))
	}
	if n.Spec.DoNotUseExternalID != old.Spec.DoNotUseExternalID {
		errs = append(errs, field.Forbidden(field.NewPath("spec", "externalID"), "may not be updated"))
	}
	return errs
}

// Event field limits, as upstream.
const (
	reportingInstanceLengthLimit = 128
	actionLengthLimit            = 128
	reasonLengthLimit            = 128
	noteLengthLimit              = 1024
)

// ValidateEvent validates a core/v1 Event. Upstream applies only its
// "legacy" event checks to this API version (no name validation), for
// compatibility with old clients; so does Portal.
func ValidateEvent(ev *corev1.Event) field.ErrorList {
	var errs field.ErrorList
	if ev.EventTime.IsZero() {
		errs = append(errs, validateLegacyEventNamespace(ev)...)
	} else {
		errs = append(errs, validateNewStyleEvent(ev)...)
	}
	return append(errs, validateDNS1123Subdomain(ev.Namespace, field.NewPath("namespace"))...)
}

// ValidateEventUpdate validates an update of a core/v1 Event; as upstream,
// only the new object's legacy checks apply.
func ValidateEventUpdate(newEv, oldEv *corev1.Event) field.ErrorList {
	return ValidateEvent(newEv)
}

// validateLegacyEventNamespace: events without eventTime must live in
// their object's namespace ("default" standing in for cluster objects).
func validateLegacyEventNamespace(ev *corev1.Event) field.ErrorList {
	objNS := ev.InvolvedObject.Namespace
	mismatch := false
	if objNS == "" {
		mismatch = ev.Namespace != metav1.NamespaceNone && ev.Namespace != metav1.NamespaceDefault
	} else {
		mismatch = ev.Namespace != objNS
	}
	if mismatch {
		return field.ErrorList{field.Invalid(field.NewPath("involvedObject", "namespace"), objNS, "does not match event.namespace")}
	}
	return nil
}

func validateNewStyleEvent(ev *corev1.Event) field.ErrorList {
	var errs field.ErrorList
	if ev.InvolvedObject.Namespace == "" && ev.Namespace != metav1.NamespaceDefault && ev.Namespace != metav1.NamespaceSystem {
		errs = append(errs, field.Invalid(field.NewPath("involvedObject", "namespace"), ev.InvolvedObject.Namespace, "does not match event.namespace"))
	}
	if ev.ReportingController == "" {
		errs = append(errs, field.Required(field.NewPath("reportingController"), ""))
	}
	errs = append(errs, msgsToErrs(field.NewPath("reportingController"), ev.ReportingController, utilvalidation.IsQualifiedName(ev.ReportingController))...)
	errs = append(errs, requiredLimited("reportingInstance", ev.ReportingInstance, reportingInstanceLengthLimit)...)
	errs = append(errs, requiredLimited("action", ev.Action, actionLengthLimit)...)
	errs = append(errs, requiredLimited("reason", ev.Reason, reasonLengthLimit)...)
	if len(ev.Message) > noteLengthLimit {
		errs = append(errs, field.Invalid(field.NewPath("message"), "", fmt.Sprintf("can have at most %v characters", noteLengthLimit)))
	}
	return errs
}

func requiredLimited(name, value string, limit int) field.ErrorList {
	var errs field.ErrorList
	if value == "" {
		errs = append(errs, field.Required(field.NewPath(name), ""))
	}
	if len(value) > limit {
		errs = append(errs, field.Invalid(field.NewPath(name), "", fmt.Sprintf("can have at most %v characters", limit)))
	}
	return errs
}
