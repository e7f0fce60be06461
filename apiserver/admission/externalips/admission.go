// Package externalips is the API server's admission plugin for
// spec.externalIPs of Services, the field CVE-2020-8554 abuses: whoever may
// set it can make every proxy in the cluster send another tenant's traffic
// for that address to their own pods.
//
// A create that sets external IPs, or an update that adds any, is admitted
// only when the requester may create services/externalips in the
// Service's namespace (asked of the server's authorizer), or when every
// added address lies in one of the allowed CIDRs (--service-external-ip-cidrs).
// With no CIDRs and no such permission, new external IPs are refused, as
// upstream's DenyServiceExternalIPs recommends. Addresses a Service already
// has stay, so an update that keeps them is never refused for them.
//
// The plugin only validates; it neither reads nor writes anything but the
// request.
package externalips

import (
	"context"
	"fmt"
	"net/netip"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/apiserver/pkg/admission"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	"k8s.io/klog/v2"
)

// PluginName is the plugin's name in the admission chain.
const PluginName = "ServiceExternalIPs"

// Plugin refuses external IPs the requester may not set. Make one with
// New; it needs the authorizer (SetAuthorizer) before use.
type Plugin struct {
	*admission.Handler
	allowed []netip.Prefix
	authz   authorizer.Authorizer
}

var _ admission.ValidationInterface = (*Plugin)(nil)

// New returns a plugin that lets anyone set external IPs inside allowed,
// and only those authorized for services/externalips any other.
func New(allowed []netip.Prefix) *Plugin {
	return &Plugin{Handler: admission.NewHandler(admission.Create, admission.Update), allowed: allowed}
}

// SetAuthorizer sets the authorizer asked whether a requester may create
// services/externalips.
func (p *Plugin) SetAuthorizer(a authorizer.Authorizer) { p.authz = a }

// ValidateInitialization fails when the plugin has no authorizer.
func (p *Plugin) ValidateInitialization() error {
	if p.authz == nil {
		return fmt.Errorf("%s: no authorizer", PluginName)
	}
	return nil
}

// Validate refuses a Service write that adds external IPs the requester
// may not set, naming each such spec.externalIPs[i].
func (p *Plugin) Validate(ctx context.Context, a admission.Attributes, _ admission.ObjectInterfaces) error {
	if a.GetResource().GroupResource() != corev1.Resource("services") || a.GetSubresource() != "" {
		return nil
	}
	svc, ok := a.GetObject().(*corev1.Service)
	if !ok {
		return apierrors.NewInternalError(fmt.Errorf("%s: got %T, want a Service", PluginName, a.GetObject()))
	}
	added := addedIPs(svc, a.GetOldObject())
	if len(added) == 0 {
		return nil
	}
	if p.mayCreateExternalIPs(ctx, a) {
		return nil
	}
	var errs field.ErrorList
	for _, i := range added {
		ip := svc.Spec.ExternalIPs[i]
		if p.inAllowedCIDRs(ip) {
			continue
		}
		errs = append(errs, field.Forbidden(field.NewPath("spec", "externalIPs").Index(i), p.reason(a, ip)))
	}
	if len(errs) == 0 {
		return nil
	}
	return apierrors.NewForbidden(a.GetResource().GroupResource(), a.GetName(), errs.ToAggregate())
}

// addedIPs returns the indexes in svc.Spec.ExternalIPs of the addresses old
// (a Service, or nil on create) does not hold.
func addedIPs(svc *corev1.Service, old any) []int {
	had := map[string]bool{}
	if o, ok := old.(*corev1.Service); ok && o != nil {
		for _, ip := range o.Spec.ExternalIPs {
			had[ip] = true
		}
	}
	var added []int
	for i, ip := range svc.Spec.ExternalIPs {
		if !had[ip] {
			added = append(added, i)
		}
	}
	return added
}

// mayCreateExternalIPs asks the authorizer. An authorizer error counts as
// no permission, as it does for the request itself: the addresses must
// then lie in the allowed CIDRs.
func (p *Plugin) mayCreateExternalIPs(ctx context.Context, a admission.Attributes) bool {
	decision, _, err := p.authz.Authorize(ctx, authorizer.AttributesRecord{
		User:            a.GetUserInfo(),
		Verb:            "create",
		Namespace:       a.GetNamespace(),
		APIGroup:        "",
		APIVersion:      "v1",
		Resource:        "services",
		Subresource:     "externalips",
		Name:            a.GetName(),
		ResourceRequest: true,
	})
	if err != nil && decision != authorizer.DecisionAllow {
		klog.InfoS("Authorizing services/externalips failed", "user", a.GetUserInfo().GetName(), "namespace", a.GetNamespace(), "err", err)
	}
	return decision == authorizer.DecisionAllow
}

// inAllowedCIDRs reports whether ip, as validation will parse it, lies in
// one of the allowed CIDRs. An address that does not parse is left to
// validation, which refuses it with its own message.
func (p *Plugin) inAllowedCIDRs(ip string) bool {
	addr, err := netip.ParseAddr(ip)
	if err != nil {
		return false
	}
	addr = addr.Unmap()
	for _, c := range p.allowed {
		if c.Contains(addr) {
			return true
		}
	}
	return false
}

func (p *Plugin) reason(a admission.Attributes, ip string) string {
	who := "the requester"
	if u := a.GetUserInfo(); u != nil {
		who = fmt.Sprintf("user %q", u.GetName())
	}
	cidrs := "no CIDRs are allowed (--service-external-ip-cidrs is empty)"
	if len(p.allowed) > 0 {
		s := make([]string, len(p.allowed))
		for i, c := range p.allowed {
			s[i] = c.String()
		}
		cidrs = "the allowed CIDRs are " + strings.Join(s, ",") + " (--service-external-ip-cidrs)"
	}
	return fmt.Sprintf("external IP %s is not allowed: %s cannot create services/externalips in namespace %q and %s; "+
		"ask a cluster administrator to grant create on services/externalips or to allow this address, or use a LoadBalancer Service instead",
		ip, who, a.GetNamespace(), cidrs)
}
