// Package reservedleases is the API server's admission plugin for the
// kube-system Leases that carry authority over the whole cluster: the
// API servers' peer leases, whose addresses become the endpoints of the
// kubernetes Service and every component's API server list, and the
// controller manager's leader Lease, whose holder alone runs controllers.
//
// Create cannot be limited by name in RBAC, and the DNS publisher and the
// Ingress controller need create on Leases in kube-system for their own.
// This plugin keeps their credentials (and any other short of
// system:masters) from creating, changing or deleting a reserved Lease:
// one labelled PeerLeaseLabel, before or after the write, may be written
// only by system:masters (the API servers' loopback identity is in it),
// and ControllerManagerLease only by the controller manager or
// system:masters.
package reservedleases

import (
	"context"
	"fmt"
	"slices"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apiserver/pkg/admission"
	"k8s.io/apiserver/pkg/authentication/user"

	"portal.dev/portal/apiserver/auth/rbac/policy"
)

const (
	// PluginName is the plugin's name in the admission chain.
	PluginName = "PortalReservedLeases"
	// Namespace is where the reserved Leases live.
	Namespace = "kube-system"
	// PeerLeaseLabel marks an API server's peer lease.
	PeerLeaseLabel = "portal.dev/apiserver"
	// ControllerManagerLease is the name of the controller manager's
	// leader Lease.
	ControllerManagerLease = "portal-controller-manager"
)

// Plugin refuses writes of reserved Leases by anyone but their owners.
// Make one with New.
type Plugin struct {
	*admission.Handler
}

var _ admission.ValidationInterface = (*Plugin)(nil)

// New returns the plugin; it checks creates, updates and deletes.
func New() *Plugin {
	return &Plugin{Handler: admission.NewHandler(admission.Create, admission.Update, admission.Delete)}
}

// Validate refuses a write of a reserved Lease in kube-system by a user
// who does not own it.
func (p *Plugin) Validate(_ context.Context, a admission.Attributes, _ admission.ObjectInterfaces) error {
	if a.GetResource().GroupResource() != coordinationv1.Resource("leases") || a.GetNamespace() != Namespace {
		return nil
	}
	u := a.GetUserInfo()
	if u != nil && slices.Contains(u.GetGroups(), user.SystemPrivilegedGroup) {
		return nil
	}
	who := "the requester"
	if u != nil {
		who = fmt.Sprintf("user %q", u.GetName())
	}
	if peerLease(a.GetObject()) || peerLease(a.GetOldObject()) {
		return apierrors.NewForbidden(a.GetResource().GroupResource(), a.GetName(), fmt.Errorf(
			"%s: Leases labelled %s announce API servers and only the API servers (%s) may write them; %s may not",
			PluginName, PeerLeaseLabel, user.SystemPrivilegedGroup, who))
	}
	if a.GetName() == ControllerManagerLease && (u == nil || u.GetName() != policy.ControllerManagerUser) {
		return apierrors.NewForbidden(a.GetResource().GroupResource(), a.GetName(), fmt.Errorf(
			"%s: Lease %s elects the controller manager and only %s may write it; %s may not",
			PluginName, ControllerManagerLease, policy.ControllerManagerUser, who))
	}
	return nil
}

// peerLease tells whether obj is a Lease labelled as an API server's.
func peerLease(obj any) bool {
	l, ok := obj.(*coordinationv1.Lease)
	if !ok || l == nil {
		return false
	}
	_, has := l.Labels[PeerLeaseLabel]
	return has
}
