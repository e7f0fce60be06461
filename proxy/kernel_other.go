//go:build !linux

package proxy

import (
	"context"
	"net/netip"
	"runtime"

	"k8s.io/klog/v2"

	"portal.dev/portal/proxy/conntrack"
	"portal.dev/portal/proxy/leftovers"
	"portal.dev/portal/proxy/userspace"
)

// newKernelProxier fails as Options.Validate does (New validates first):
// the kernel modes need Linux.
func newKernelProxier(o Options, _ []netip.Prefix) (Proxier, conntrack.Interface, error) {
	return nil, nil, needsLinux(o, runtime.GOOS)
}

// addVIPLink leaves the userspace mode without the VIP link: it is a
// Linux link, so Service addresses cannot be made local here.
func addVIPLink(*userspace.Config) {
	klog.InfoS("Userspace proxy off Linux: serving NodePorts only (Service addresses need the "+leftovers.VIPLink+" link, which needs Linux); each Service's address is logged", "os", runtime.GOOS)
}

// CleanupAll fails: there are no kernel rules of Portal's off Linux (see
// needsLinux).
func CleanupAll(context.Context) error {
	return needsLinux(Options{Mode: ModeUserspace, Cleanup: true}, runtime.GOOS)
}
