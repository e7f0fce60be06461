// Package family is what the kernel proxy modes (nftables, iptables) do
// the same way around their per-IP-family proxiers: running the hook
// that clears other modes' rules once before the first sync, syncing and
// cleaning up every family and reporting all their errors, and picking a
// family's cluster CIDR. It knows nothing of tables or rules; each
// family's proxier owns its own.
package family

import (
	"context"
	"errors"
	"net/netip"
	"time"

	"k8s.io/klog/v2"

	"portal.dev/portal/proxy/snapshot"
)

// Proxier programs one IP family's share of a kernel proxy mode.
type Proxier interface {
	// Sync programs req for the family.
	Sync(ctx context.Context, req snapshot.Request) error
	// Cleanup removes everything the family's proxier wrote, which then
	// forgets it, so its next Sync is a full one.
	Cleanup(ctx context.Context) error
}

// Set runs a mode's per-family proxiers as one. Its zero value has no
// family. It is not safe for concurrent use; the proxy core calls it
// from one goroutine.
type Set[P Proxier] struct {
	// Families are the proxiers, IPv4 first.
	Families []P
	// BeforeFirstSync, if set, runs once before the first sync; the
	// proxy uses it to remove the rules other Portal modes left.
	BeforeFirstSync func(ctx context.Context) error

	started bool
}

// Sync runs BeforeFirstSync on the first call, then syncs every family,
// even after one failed: the families' tables are independent, and a
// failed one stays as it was.
func (s *Set[P]) Sync(ctx context.Context, req snapshot.Request) error {
	if !s.started && s.BeforeFirstSync != nil {
		start := time.Now()
		err := s.BeforeFirstSync(ctx)
		klog.V(2).InfoS("Looked for other proxy modes' rules", "took", time.Since(start).Round(time.Millisecond))
		if err != nil {
			// Other modes' leftovers shadow or duplicate our rules but do
			// not stop ours from working: log, go on, retry next start.
			klog.ErrorS(err, "Could not remove other proxy modes' rules")
		}
	}
	s.started = true
	var errs []error
	for _, p := range s.Families {
		if err := p.Sync(ctx, req); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// Cleanup cleans every family up, even after one failed.
func (s *Set[P]) Cleanup(ctx context.Context) error {
	var errs []error
	for _, p := range s.Families {
		if err := p.Cleanup(ctx); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// ClusterCIDR returns the prefix of family f in cidrs, which hold at
// most one per family, or the zero Prefix if none is.
func ClusterCIDR(cidrs []netip.Prefix, f snapshot.Family) netip.Prefix {
	var cidr netip.Prefix
	for _, c := range cidrs {
		if snapshot.FamilyOf(c.Addr()) == f {
			cidr = c
		}
	}
	return cidr
}
