package conntrack

import (
	"context"
	"errors"
	"fmt"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"portal.dev/portal/proxy/snapshot"
)

// Cleaner deletes stale UDP entries after each successful sync of a
// kernel proxy mode.
type Cleaner struct {
	CT Interface
	// OnDeleted, when set, is told how many entries each sync deleted.
	OnDeleted func(n int)
}

// AfterSync deletes what the sync from prev to cur made stale. A full
// sync reconciles against the whole UDP table (the proxy may have missed
// changes while it was down); a partial one only looks at what changed.
func (c *Cleaner) AfterSync(ctx context.Context, prev, cur *snapshot.Snapshot, changed map[types.NamespacedName]struct{}, full bool) error {
	var filters []Filter
	var errs []error
	// With no UDP Service there is nothing to reconcile against; what a
	// deleted one left is in Changes.
	if full && hasUDP(cur) {
		for _, f := range families {
			entries, err := c.CT.List(ctx, f, v1.ProtocolUDP)
			if err != nil {
				errs = append(errs, err)
				continue
			}
			filters = append(filters, Reconcile(entries, cur, f)...)
		}
		if len(errs) > 0 {
			// Listing failed: fall back to what the snapshots say.
			filters = append(filters, Changes(prev, cur, changed)...)
		}
	} else {
		filters = Changes(prev, cur, changed)
	}
	deleted := 0
	for _, f := range sortFilters(filters) {
		n, err := c.CT.Delete(ctx, f)
		if err != nil {
			errs = append(errs, fmt.Errorf("delete conntrack entries %s: %w", f, err))
			continue
		}
		deleted += n
	}
	if c.OnDeleted != nil && deleted > 0 {
		c.OnDeleted(deleted)
	}
	return errors.Join(errs...)
}

func hasUDP(s *snapshot.Snapshot) bool {
	for _, svc := range s.Services {
		for _, p := range svc.Ports {
			if p.Protocol == v1.ProtocolUDP {
				return true
			}
		}
	}
	return false
}
