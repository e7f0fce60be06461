//go:build linux

package nftables

import (
	"sigs.k8s.io/knftables"

	"portal.dev/portal/proxy/snapshot"
)

// baseChain is a chain hooked into netfilter. Priorities are numbers
// because nft 1.0.6 refuses the name "dstnat" in the output hook.
type baseChain struct {
	name     string
	typ      knftables.BaseChainType
	hook     knftables.BaseChainHook
	priority knftables.BaseChainPriority
	rule     string
}

var baseChains = []baseChain{
	// loadBalancerSourceRanges are checked before DNAT, on the address
	// the client used. Filter chains cannot reject in prerouting, and
	// dropping is what kube-proxy does here anyway.
	{"filter-prerouting", knftables.FilterType, knftables.PreroutingHook, "-110", "ct state new jump " + firewallCheck},
	{"filter-output", knftables.FilterType, knftables.OutputHook, "-110", "ct state new jump " + firewallCheck},
	// "No endpoints" is checked after DNAT: a packet still addressed to
	// a Service frontend was not load-balanced. Locally generated packets
	// are DNATed in the output hook at -100, hence a second output chain
	// after it; short-circuited traffic to a Local Service is thereby not
	// dropped.
	{"filter-input", knftables.FilterType, knftables.InputHook, "-110", "ct state new jump " + endpointsCheck},
	{"filter-forward", knftables.FilterType, knftables.ForwardHook, "-110", "ct state new jump " + endpointsCheck},
	{"filter-output-post-dnat", knftables.FilterType, knftables.OutputHook, "-90", "ct state new jump " + endpointsCheck},
	{"nat-prerouting", knftables.NATType, knftables.PreroutingHook, "-100", "jump " + servicesChain},
	{"nat-output", knftables.NATType, knftables.OutputHook, "-100", "jump " + servicesChain},
	{"nat-postrouting", knftables.NATType, knftables.PostroutingHook, "100", "jump " + masqueradingChain},
}

// staticNames lists every object writeStatic creates; full syncs never
// treat them as leftovers.
var staticNames = func() []string {
	names := []string{servicesChain, endpointsCheck, firewallCheck, masqueradingChain, rejectChain,
		serviceIPsMap, serviceNodePorts, noEndpointServices, noEndpointNodePort,
		firewallIPsSet, firewallAllowSet, hairpinSet, nodePortIPsSet}
	for _, bc := range baseChains {
		names = append(names, bc.name)
	}
	return names
}()

// writeStatic (re)creates the table's fixed skeleton and empties the
// shared maps and sets, which the caller then refills.
func (fp *familyProxier) writeStatic(tx txOps, node *snapshot.Node) {
	b := fp.b
	tx.Add(&knftables.Table{Comment: knftables.PtrTo("Portal service proxy, nftables mode")})

	frontend := b.addrType + " . inet_proto . inet_service"
	for _, m := range []*knftables.Map{
		{Name: serviceIPsMap, Type: frontend + " : verdict", Comment: knftables.PtrTo("cluster IPs, externalIPs and load balancer VIPs")},
		{Name: serviceNodePorts, Type: "inet_proto . inet_service : verdict", Comment: knftables.PtrTo("NodePorts")},
		{Name: noEndpointServices, Type: frontend + " : verdict", Comment: knftables.PtrTo("frontends without usable endpoints")},
		{Name: noEndpointNodePort, Type: "inet_proto . inet_service : verdict", Comment: knftables.PtrTo("NodePorts without usable endpoints")},
	} {
		tx.Add(m)
		tx.Flush(m)
	}
	for _, s := range []*knftables.Set{
		{Name: firewallIPsSet, Type: frontend, Comment: knftables.PtrTo("load balancer VIPs with loadBalancerSourceRanges")},
		{Name: firewallAllowSet, Type: frontend + " . " + b.addrType, Flags: []knftables.SetFlag{knftables.IntervalFlag}, Comment: knftables.PtrTo("sources allowed to those VIPs")},
		{Name: hairpinSet, Type: b.addrType + " . " + b.addrType, Comment: knftables.PtrTo("endpoints that may reach themselves through a Service")},
		{Name: nodePortIPsSet, Type: b.addrType, Comment: knftables.PtrTo("addresses accepting NodePorts (--nodeport-addresses)")},
	} {
		tx.Add(s)
		tx.Flush(s)
	}
	for _, bc := range baseChains {
		c := &knftables.Chain{Name: bc.name, Type: knftables.PtrTo(bc.typ), Hook: knftables.PtrTo(bc.hook), Priority: knftables.PtrTo(bc.priority)}
		tx.Add(c)
		tx.Flush(c)
	}
	for _, name := range []string{servicesChain, endpointsCheck, firewallCheck, masqueradingChain, rejectChain} {
		tx.Add(&knftables.Chain{Name: name})
		tx.Flush(&knftables.Chain{Name: name})
	}
	for _, bc := range baseChains {
		tx.Add(&knftables.Rule{Chain: bc.name, Rule: bc.rule})
	}

	all := node == nil || node.NodePorts.All
	nodePortMatch := b.ip + " daddr @" + nodePortIPsSet
	if all {
		// Any local address but loopback: NodePorts on 127.0.0.1 would
		// need route_localnet, which kube-proxy's nftables mode refuses too.
		nodePortMatch = "fib daddr type local " + b.ip + " daddr != " + b.loopback
	} else {
		for _, a := range node.NodePorts.Of(b.family) {
			tx.Add(&knftables.Element{Set: nodePortIPsSet, Key: []string{a.String()}})
		}
	}
	dispatch := b.ip + " daddr . meta l4proto . th dport vmap @"
	rules := []knftables.Rule{
		{Chain: servicesChain, Rule: dispatch + serviceIPsMap},
		{Chain: servicesChain, Rule: nodePortMatch + " meta l4proto . th dport vmap @" + serviceNodePorts},
		{Chain: endpointsCheck, Rule: dispatch + noEndpointServices},
		{Chain: endpointsCheck, Rule: nodePortMatch + " meta l4proto . th dport vmap @" + noEndpointNodePort},
		{Chain: firewallCheck, Rule: b.ip + " daddr . meta l4proto . th dport . " + b.ip + " saddr @" + firewallAllowSet + " return"},
		{Chain: firewallCheck, Rule: b.ip + " daddr . meta l4proto . th dport @" + firewallIPsSet + " drop"},
		// The mark is cleared before masquerading so a packet that passes
		// through twice (tunnels) is not masqueraded twice.
		{Chain: masqueradingChain, Rule: "meta mark & " + masqueradeMark + " == " + masqueradeMark + " meta mark set meta mark ^ " + masqueradeMark + " masquerade fully-random"},
		{Chain: masqueradingChain, Rule: "ct status dnat " + b.ip + " saddr . " + b.ip + " daddr @" + hairpinSet + " masquerade fully-random"},
		{Chain: rejectChain, Rule: "meta l4proto tcp reject with tcp reset"},
		{Chain: rejectChain, Rule: "reject"},
	}
	for i := range rules {
		tx.Add(&rules[i])
	}
}
