//go:build linux

package nftables

import (
	"context"
	"reflect"
	"testing"

	"portal.dev/portal/proxy/nftables/netlink"
	"portal.dev/portal/proxy/status"
)

// ruleCounters are a table's rule counters where ns/a has endpoints
// (internal and external chains), ns/b has none, and ns/c uses affinity;
// chains of other kinds are ignored.
var ruleCounters = []netlink.RuleCounter{
	{Chain: "service-ns/a/tcp/80", Packets: 7},
	{Chain: "external-ns/a/tcp/80", Packets: 2},
	{Chain: "service-ns/a/udp/53", Packets: 1},
	{Chain: "refuse-ns/b/tcp/80", Packets: 3},
	{Chain: "service-ns/c/tcp/80", Packets: 4},
	{Chain: "service-ns/c/tcp/80/g0", Packets: 5},
	{Chain: "reject-chain", Packets: 99},
}

func TestTraffic(t *testing.T) {
	tests := []struct {
		name     string
		families []string
		want     map[string]map[string]status.Counts
	}{
		{
			name:     "one family",
			families: []string{"ip"},
			want: map[string]map[string]status.Counts{
				"ns/a": {"tcp/80": {Connections: 9}, "udp/53": {Connections: 1}},
				"ns/b": {"tcp/80": {Refused: 3}},
				"ns/c": {"tcp/80": {Connections: 4}},
			},
		},
		{
			name:     "dual-stack ports add up both tables",
			families: []string{"ip", "ip6"},
			want: map[string]map[string]status.Counts{
				"ns/a": {"tcp/80": {Connections: 18}, "udp/53": {Connections: 2}},
				"ns/b": {"tcp/80": {Refused: 6}},
				"ns/c": {"tcp/80": {Connections: 8}},
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p, _, _ := newFakeProxier(Config{})
			p.set.Families = p.set.Families[:len(tc.families)]
			var asked []string
			p.readCounters = func(_ context.Context, family string) ([]netlink.RuleCounter, error) {
				asked = append(asked, family)
				return ruleCounters, nil
			}
			got, err := p.Traffic(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(asked, tc.families) {
				t.Errorf("listed %v, want %v", asked, tc.families)
			}
			if !reflect.DeepEqual(got.Services, tc.want) {
				t.Errorf("got %v, want %v", got.Services, tc.want)
			}
		})
	}
}
