// Package status is the read-only account a node's proxy gives of what it
// programmed for each Service: the endpoints, when, the EndpointSlice
// versions it had received and whether newer changes still wait for a
// sync. portal explain reads it through the node agent (the API server's
// nodes/NAME/proxy subresource) to show "node2 still routes to a deleted
// pod" without root on the node. The package is pure data: the proxy
// fills a Book after each sync and serves Service values as JSON; it
// touches no client and no kernel.
package status

import (
	"slices"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"portal.dev/portal/proxy/snapshot"
)

// Service is one node's proxy's account of one Service, the JSON the
// status endpoint serves.
type Service struct {
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	// Node is the proxy's node.
	Node string `json:"node"`
	// Mode is the proxy mode (nftables, iptables, userspace).
	Mode string `json:"mode"`
	// Programmed says whether the Service is in the rules the proxy last
	// wrote (false: unknown to it, or not proxied: headless, ExternalName).
	Programmed bool `json:"programmed"`
	// ProgrammedAt is when the proxy last wrote a change of this Service's
	// ports or endpoints (zero when never, since it started).
	ProgrammedAt time.Time `json:"programmedAt,omitzero"`
	// TriggerTime is the newest EndpointSlice trigger time among the
	// changes written at ProgrammedAt: ProgrammedAt minus it is the
	// programming latency of that change on this node.
	TriggerTime time.Time `json:"triggerTime,omitzero"`
	// LastSync is when the proxy last synced successfully, any Service.
	LastSync time.Time `json:"lastSync,omitzero"`
	// Pending is true when changes to the Service have been received but
	// not yet programmed.
	Pending bool `json:"pending"`
	// SliceVersions are the resourceVersions of the Service's
	// EndpointSlices the proxy has received, by slice name.
	SliceVersions map[string]string `json:"sliceVersions,omitempty"`
	// ExternalPolicyLocal and InternalPolicyLocal are the traffic
	// policies the proxy applies.
	ExternalPolicyLocal bool `json:"externalPolicyLocal,omitempty"`
	InternalPolicyLocal bool `json:"internalPolicyLocal,omitempty"`
	// LocalReady counts the ready endpoints on this node.
	LocalReady int `json:"localReady"`
	// Endpoints are the endpoints programmed, every port.
	Endpoints []Endpoint `json:"endpoints"`
}

// Endpoint is one programmed endpoint of one Service port.
type Endpoint struct {
	Port        string `json:"port"` // the Service port's name ("" when unnamed) and protocol: "http/TCP"
	Address     string `json:"address"`
	Ready       bool   `json:"ready"`
	Serving     bool   `json:"serving"`
	Terminating bool   `json:"terminating"`
	Node        string `json:"node,omitempty"`
}

// programmed is when a Service's rules last changed.
type programmed struct {
	at, trigger time.Time
}

// Book records what the proxy programmed. The proxy's sync goroutine
// writes it, the status endpoint reads it; its zero value is ready.
type Book struct {
	mu       sync.Mutex
	snap     *snapshot.Snapshot
	lastSync time.Time
	changed  map[types.NamespacedName]programmed
}

// Synced records a successful sync at now of snap, in which the Services
// changed were rewritten; triggers are the slice trigger times behind
// those changes. Services gone from snap are forgotten, so that churning
// Services (CI namespaces, preview environments) do not grow the Book
// without end; one deleted in this very sync is kept until the next.
func (b *Book) Synced(snap *snapshot.Snapshot, changed map[types.NamespacedName]struct{}, triggers map[types.NamespacedName][]time.Time, now time.Time) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.changed == nil {
		b.changed = map[types.NamespacedName]programmed{}
	}
	b.snap, b.lastSync = snap, now
	for nn := range b.changed {
		if _, ok := changed[nn]; !ok && (snap == nil || snap.Services[nn] == nil) {
			delete(b.changed, nn)
		}
	}
	for nn := range changed {
		p := programmed{at: now}
		for _, t := range triggers[nn] {
			if t.After(p.trigger) {
				p.trigger = t
			}
		}
		b.changed[nn] = p
	}
}

// Service returns the account of nn; versions and pending come from the
// proxy's endpoint tracker (what it has received).
func (b *Book) Service(nn types.NamespacedName, node, mode string, versions map[string]string, pending bool) Service {
	b.mu.Lock()
	snap, last, p := b.snap, b.lastSync, b.changed[nn]
	b.mu.Unlock()
	out := Service{Namespace: nn.Namespace, Name: nn.Name, Node: node, Mode: mode, LastSync: last,
		ProgrammedAt: p.at, TriggerTime: p.trigger, Pending: pending, SliceVersions: versions, Endpoints: []Endpoint{}}
	if snap == nil {
		return out
	}
	svc := snap.Services[nn]
	if svc == nil {
		return out
	}
	out.Programmed = true
	out.ExternalPolicyLocal, out.InternalPolicyLocal = svc.ExternalPolicyLocal, svc.InternalPolicyLocal
	eps := snap.Endpoints[nn]
	out.LocalReady = snapshot.LocalReadyCount(eps)
	for _, port := range svc.Ports {
		for _, e := range eps.For(port.Key()) {
			out.Endpoints = append(out.Endpoints, Endpoint{Port: port.Name + "/" + string(port.Protocol), Address: e.String(),
				Ready: e.Ready, Serving: e.Serving, Terminating: e.Terminating, Node: e.NodeName})
		}
	}
	slices.SortFunc(out.Endpoints, func(a, b Endpoint) int {
		if a.Port != b.Port {
			if a.Port < b.Port {
				return -1
			}
			return 1
		}
		if a.Address < b.Address {
			return -1
		}
		if a.Address > b.Address {
			return 1
		}
		return 0
	})
	return out
}
