//go:build linux

package nftables

import (
	"context"
	"reflect"
	"testing"

	"portal.dev/portal/proxy/status"
)

// listing is nft --json --terse output for a table where ns/a has
// endpoints (internal and external chains), ns/b has none, and ns/c uses
// affinity; chains of other kinds and counterless rules are ignored.
const listing = `{"nftables": [{"metainfo": {"version": "1.0.6", "json_schema_version": 1}},
{"table": {"family": "ip", "name": "portal", "handle": 1}},
{"chain": {"family": "ip", "table": "portal", "name": "service-ns/a/tcp/80", "handle": 2}},
{"rule": {"family": "ip", "table": "portal", "chain": "services", "handle": 3, "expr": [{"vmap": {}}]}},
{"rule": {"family": "ip", "table": "portal", "chain": "service-ns/a/tcp/80", "handle": 4, "expr": [{"match": {"op": "==", "left": {"meta": {"key": "l4proto"}}, "right": "tcp"}}, {"counter": {"packets": 7, "bytes": 420}}, {"dnat": {}}]}},
{"rule": {"family": "ip", "table": "portal", "chain": "external-ns/a/tcp/80", "handle": 5, "expr": [{"counter": {"packets": 2, "bytes": 120}}, {"dnat": {}}]}},
{"rule": {"family": "ip", "table": "portal", "chain": "service-ns/a/udp/53", "handle": 6, "expr": [{"counter": {"packets": 1, "bytes": 60}}, {"dnat": {}}]}},
{"rule": {"family": "ip", "table": "portal", "chain": "refuse-ns/b/tcp/80", "handle": 7, "expr": [{"counter": {"packets": 3, "bytes": 180}}, {"goto": {"target": "reject-chain"}}]}},
{"rule": {"family": "ip", "table": "portal", "chain": "service-ns/c/tcp/80", "handle": 8, "expr": [{"counter": {"packets": 4, "bytes": 240}}]}},
{"rule": {"family": "ip", "table": "portal", "chain": "service-ns/c/tcp/80/g0", "handle": 9, "expr": [{"dnat": {}}]}},
{"rule": {"family": "ip", "table": "portal", "chain": "reject-chain", "handle": 10, "expr": [{"counter": {"packets": 99, "bytes": 1}}, {"reject": null}]}}
]}`

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
			p.listTable = func(_ context.Context, family string) ([]byte, error) {
				asked = append(asked, family)
				return []byte(listing), nil
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
