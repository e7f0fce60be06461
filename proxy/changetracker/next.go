package changetracker

import (
	"maps"
	"reflect"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"portal.dev/portal/proxy/snapshot"
)

// Result says what one Next call changed.
type Result struct {
	// Changed lists the Services whose ports or endpoints differ from the
	// previous snapshot.
	Changed map[types.NamespacedName]struct{}
	// NodeChanged is true when this node's name, zone or addresses changed.
	NodeChanged bool
	// ServiceChanges and EndpointChanges count the Services whose spec or
	// whose endpoints changed.
	ServiceChanges, EndpointChanges int
	// TriggerTimes are the last-change-trigger-time annotations of the
	// slices behind the endpoint changes, for programming latency.
	TriggerTimes map[types.NamespacedName][]time.Time
}

// Next applies everything pending in the trackers to prev (nil: empty) and
// returns the new snapshot and what changed. prev is not modified; the new
// snapshot shares every unchanged value with it.
func Next(prev *snapshot.Snapshot, svcs *ServiceTracker, eps *EndpointsTracker, node *snapshot.Node) (*snapshot.Snapshot, Result) {
	if prev == nil {
		prev = &snapshot.Snapshot{}
	}
	next := &snapshot.Snapshot{
		Services:  maps.Clone(prev.Services),
		Endpoints: maps.Clone(prev.Endpoints),
		Node:      node,
	}
	if next.Services == nil {
		next.Services = map[types.NamespacedName]*snapshot.Service{}
	}
	if next.Endpoints == nil {
		next.Endpoints = map[types.NamespacedName]*snapshot.ServiceEndpoints{}
	}
	res := Result{Changed: map[types.NamespacedName]struct{}{}}
	if svcs != nil {
		for nn, ch := range svcs.checkout() {
			old := prev.Services[nn]
			if reflect.DeepEqual(old, ch.current) {
				continue
			}
			if ch.current == nil {
				delete(next.Services, nn)
			} else {
				next.Services[nn] = ch.current
			}
			res.Changed[nn] = struct{}{}
			res.ServiceChanges++
		}
	}
	if eps != nil {
		merged, triggers := eps.checkout()
		for nn, cur := range merged {
			if reflect.DeepEqual(prev.Endpoints[nn], cur) {
				continue
			}
			if cur == nil {
				delete(next.Endpoints, nn)
			} else {
				next.Endpoints[nn] = cur
			}
			res.Changed[nn] = struct{}{}
			res.EndpointChanges++
			if tt := triggers[nn]; len(tt) > 0 {
				if res.TriggerTimes == nil {
					res.TriggerTimes = map[types.NamespacedName][]time.Time{}
				}
				res.TriggerTimes[nn] = tt
			}
		}
	}
	res.NodeChanged = !reflect.DeepEqual(prev.Node, node)
	return next, res
}
