//go:build linux

package netlink

import (
	"testing"

	"golang.org/x/sys/unix"
)

func TestRuleCounter(t *testing.T) {
	// rule builds a rule message's attributes as the kernel dumps them:
	// the chain, then expressions, each a name and its data.
	rule := func(chain string, exprs ...func(b *nlBatch)) []byte {
		b := &nlBatch{}
		b.str(unix.NFTA_RULE_TABLE, "portal")
		b.str(unix.NFTA_RULE_CHAIN, chain)
		b.open(unix.NFTA_RULE_EXPRESSIONS)
		for _, e := range exprs {
			e(b)
		}
		b.close()
		return b.buf
	}
	expr := func(name string, data func(b *nlBatch)) func(b *nlBatch) {
		return func(b *nlBatch) {
			b.open(unix.NFTA_LIST_ELEM)
			b.str(unix.NFTA_EXPR_NAME, name)
			b.open(unix.NFTA_EXPR_DATA)
			data(b)
			b.close()
			b.close()
		}
	}
	counter := func(packets uint64) func(b *nlBatch) {
		return expr("counter", func(b *nlBatch) {
			b.u64(unix.NFTA_COUNTER_BYTES, packets*60)
			b.u64(unix.NFTA_COUNTER_PACKETS, packets)
		})
	}
	dnat := expr("nat", func(b *nlBatch) { b.u32(unix.NFTA_NAT_TYPE, unix.NFT_NAT_DNAT) })
	tests := []struct {
		name   string
		attrs  []byte
		want   RuleCounter
		wantOK bool
	}{
		{"a counter before the dnat", rule("service-ns/a/tcp/80", counter(7), dnat), RuleCounter{Chain: "service-ns/a/tcp/80", Packets: 7}, true},
		{"a counter alone", rule("refuse-ns/b/tcp/80", counter(3)), RuleCounter{Chain: "refuse-ns/b/tcp/80", Packets: 3}, true},
		{"no counter", rule("services", dnat), RuleCounter{Chain: "services"}, false},
		{"truncated: no panic, no counter", rule("service-ns/a/tcp/80", counter(7))[:30], RuleCounter{}, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := ruleCounter(tc.attrs)
			if got != tc.want || ok != tc.wantOK {
				t.Errorf("got %+v, %v; want %+v, %v", got, ok, tc.want, tc.wantOK)
			}
		})
	}
}
