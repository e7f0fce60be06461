//go:build linux

package nftables

import (
	"context"
	"fmt"
	"strings"

	"portal.dev/portal/proxy/nftables/netlink"
	"portal.dev/portal/proxy/status"
)

// Traffic reads the counters of every family's table: per Service port,
// the connections its chains sent to an endpoint and those its refuse
// chain rejected (see choose and port). It asks the kernel for a dump of
// each table's rules (netlink.Counters), and only when asked: reading
// counters costs the syncs nothing. Safe to call while a sync runs.
func (p *Proxier) Traffic(ctx context.Context) (status.Traffic, error) {
	read := p.readCounters
	if read == nil {
		read = func(_ context.Context, family string) ([]netlink.RuleCounter, error) {
			return netlink.Counters(family, tableName)
		}
	}
	var t status.Traffic
	for _, fp := range p.set.Families {
		counters, err := read(ctx, fp.b.ip)
		if err != nil {
			return status.Traffic{}, fmt.Errorf("read the %s %s table's counters: %w", fp.b.ip, tableName, err)
		}
		addTraffic(&t, counters)
	}
	return t, nil
}

// addTraffic adds to t the counters of the per-Service chains among
// counters.
func addTraffic(t *status.Traffic, counters []netlink.RuleCounter) {
	for _, c := range counters {
		key, port, refused, ok := countedChain(c.Chain)
		if !ok {
			continue
		}
		counts := status.Counts{Connections: c.Packets}
		if refused {
			counts = status.Counts{Refused: c.Packets}
		}
		t.AddPort(key, port, counts)
	}
}

// countedChain parses the name of a chain that counts a Service port's
// traffic, "KIND-namespace/name/protocol/port": the Service's
// "namespace/name", the port's "protocol/port", and whether it counts
// refusals. Affinity group chains ("…/g0") count nothing.
func countedChain(name string) (key, port string, refused, ok bool) {
	var rest string
	switch {
	case strings.HasPrefix(name, refusePrefix):
		rest, refused = name[len(refusePrefix):], true
	case strings.HasPrefix(name, "service-"), strings.HasPrefix(name, "cluster-"), strings.HasPrefix(name, "external-"):
		_, rest, _ = strings.Cut(name, "-")
	default:
		return "", "", false, false
	}
	parts := strings.Split(rest, "/")
	if len(parts) != 4 {
		return "", "", false, false
	}
	return parts[0] + "/" + parts[1], parts[2] + "/" + parts[3], refused, true
}
