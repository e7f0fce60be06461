package servicelb

import (
	"errors"
	"net/netip"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
)

const v4, v6 = corev1.IPv4Protocol, corev1.IPv6Protocol

func addrs(s ...string) []netip.Addr {
	out := make([]netip.Addr, 0, len(s))
	for _, x := range s {
		out = append(out, netip.MustParseAddr(x))
	}
	return out
}

func auto(f corev1.IPFamily) Request { return Request{Family: f} }

func want(ip string) Request {
	a := netip.MustParseAddr(ip)
	return Request{Family: familyOf(a), IP: a}
}

func TestAllocatorAllocate(t *testing.T) {
	type step struct {
		owner   string
		reqs    []Request
		want    []string
		wantErr error
	}
	tests := []struct {
		name  string
		pools string
		steps []step
	}{
		{
			name:  "lowest free address, first range first",
			pools: "192.0.2.1-192.0.2.2,198.51.100.1/32",
			steps: []step{
				{owner: "a", reqs: []Request{auto(v4)}, want: []string{"192.0.2.1"}},
				{owner: "b", reqs: []Request{auto(v4)}, want: []string{"192.0.2.2"}},
				{owner: "c", reqs: []Request{auto(v4)}, want: []string{"198.51.100.1"}},
				{owner: "d", reqs: []Request{auto(v4)}, wantErr: ErrExhausted},
			},
		},
		{
			name:  "again for the same owner keeps its address",
			pools: "192.0.2.0/29",
			steps: []step{
				{owner: "a", reqs: []Request{auto(v4)}, want: []string{"192.0.2.1"}},
				{owner: "a", reqs: []Request{auto(v4)}, want: []string{"192.0.2.1"}},
			},
		},
		{
			name:  "dual stack in request order",
			pools: "192.0.2.0/30,2001:db8::/126",
			steps: []step{
				{owner: "a", reqs: []Request{auto(v6), auto(v4)}, want: []string{"2001:db8::", "192.0.2.1"}},
			},
		},
		{
			name:  "family without a pool",
			pools: "192.0.2.0/30",
			steps: []step{{owner: "a", reqs: []Request{auto(v6)}, wantErr: ErrNoPool}},
		},
		{
			name:  "specific address",
			pools: "192.0.2.0/29",
			steps: []step{
				{owner: "a", reqs: []Request{want("192.0.2.5")}, want: []string{"192.0.2.5"}},
				{owner: "b", reqs: []Request{auto(v4)}, want: []string{"192.0.2.1"}},
			},
		},
		{
			name:  "specific address outside the pools",
			pools: "192.0.2.0/29",
			steps: []step{{owner: "a", reqs: []Request{want("192.0.2.0")}, wantErr: ErrNotInPool}},
		},
		{
			name:  "specific address of another owner",
			pools: "192.0.2.0/29",
			steps: []step{
				{owner: "a", reqs: []Request{auto(v4)}, want: []string{"192.0.2.1"}},
				{owner: "b", reqs: []Request{want("192.0.2.1")}, wantErr: ErrInUse},
			},
		},
		{
			name:  "switching to a specific address frees the old one",
			pools: "192.0.2.0/29",
			steps: []step{
				{owner: "a", reqs: []Request{auto(v4)}, want: []string{"192.0.2.1"}},
				{owner: "a", reqs: []Request{want("192.0.2.3")}, want: []string{"192.0.2.3"}},
				{owner: "b", reqs: []Request{auto(v4)}, want: []string{"192.0.2.1"}},
			},
		},
		{
			name:  "failure keeps what the owner held",
			pools: "192.0.2.0/30,2001:db8::/128",
			steps: []step{
				{owner: "x", reqs: []Request{auto(v6)}, want: []string{"2001:db8::"}},
				{owner: "a", reqs: []Request{auto(v4)}, want: []string{"192.0.2.1"}},
				{owner: "a", reqs: []Request{auto(v4), auto(v6)}, want: []string{"192.0.2.1"}, wantErr: ErrExhausted},
				{owner: "b", reqs: []Request{auto(v4)}, want: []string{"192.0.2.2"}},
			},
		},
		{
			name:  "dropping a family frees its address",
			pools: "192.0.2.0/30,2001:db8::/128",
			steps: []step{
				{owner: "a", reqs: []Request{auto(v4), auto(v6)}, want: []string{"192.0.2.1", "2001:db8::"}},
				{owner: "a", reqs: []Request{auto(v4)}, want: []string{"192.0.2.1"}},
				{owner: "b", reqs: []Request{auto(v6)}, want: []string{"2001:db8::"}},
			},
		},
		{
			name:  "huge IPv6 pool",
			pools: "2001:db8::/64",
			steps: []step{
				{owner: "a", reqs: []Request{want("2001:db8::")}, want: []string{"2001:db8::"}},
				{owner: "b", reqs: []Request{auto(v6)}, want: []string{"2001:db8::1"}},
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			a := NewAllocator(mustPools(t, tc.pools))
			for i, s := range tc.steps {
				got, err := a.Allocate(s.owner, s.reqs)
				if !errors.Is(err, s.wantErr) {
					t.Fatalf("step %d (%s): got error %v, want %v", i, s.owner, err, s.wantErr)
				}
				if !slices.Equal(got, addrs(s.want...)) {
					t.Fatalf("step %d (%s): got %v, want %v", i, s.owner, got, s.want)
				}
				if held := a.Assigned(s.owner); !slices.Equal(held, got) {
					t.Fatalf("step %d (%s): holds %v, returned %v", i, s.owner, held, got)
				}
			}
		})
	}
}

func TestAllocatorRelease(t *testing.T) {
	a := NewAllocator(mustPools(t, "192.0.2.1-192.0.2.1"))
	if _, err := a.Allocate("a", []Request{auto(v4)}); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Allocate("b", []Request{auto(v4)}); !errors.Is(err, ErrExhausted) {
		t.Fatalf("b before release: got %v, want %v", err, ErrExhausted)
	}
	if got := a.Release("a"); !slices.Equal(got, addrs("192.0.2.1")) {
		t.Errorf("release a: got %v, want [192.0.2.1]", got)
	}
	if got := a.Release("a"); len(got) != 0 {
		t.Errorf("second release of a: got %v, want nothing", got)
	}
	got, err := a.Allocate("b", []Request{auto(v4)})
	if err != nil || !slices.Equal(got, addrs("192.0.2.1")) {
		t.Errorf("b after release: got %v %v, want [192.0.2.1]", got, err)
	}
	if o, _ := a.Owner(netip.MustParseAddr("192.0.2.1")); o != "b" {
		t.Errorf("owner: got %q, want b", o)
	}
}

func TestAllocatorRebuild(t *testing.T) {
	tests := []struct {
		name        string
		in          []Assignment
		wantHeld    map[string][]string
		wantRefused []Assignment
	}{
		{
			name:     "assignments kept",
			in:       []Assignment{{"a", addrs("192.0.2.3")}, {"b", addrs("192.0.2.1", "2001:db8::5")}},
			wantHeld: map[string][]string{"a": {"192.0.2.3"}, "b": {"192.0.2.1", "2001:db8::5"}},
		},
		{
			name:        "first claim wins",
			in:          []Assignment{{"old", addrs("192.0.2.3")}, {"new", addrs("192.0.2.3")}},
			wantHeld:    map[string][]string{"old": {"192.0.2.3"}},
			wantRefused: []Assignment{{"new", addrs("192.0.2.3")}},
		},
		{
			name:        "outside the pools",
			in:          []Assignment{{"a", addrs("203.0.113.1", "192.0.2.2")}},
			wantHeld:    map[string][]string{"a": {"192.0.2.2"}},
			wantRefused: []Assignment{{"a", addrs("203.0.113.1")}},
		},
		{
			name:        "two of one family",
			in:          []Assignment{{"a", addrs("192.0.2.1", "192.0.2.2")}},
			wantHeld:    map[string][]string{"a": {"192.0.2.1"}},
			wantRefused: []Assignment{{"a", addrs("192.0.2.2")}},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			a := NewAllocator(mustPools(t, "192.0.2.0/29,2001:db8::/120"))
			if _, err := a.Allocate("stale", []Request{auto(v4)}); err != nil {
				t.Fatal(err)
			}
			refused := a.Rebuild(tc.in)
			if !slices.EqualFunc(refused, tc.wantRefused, func(x, y Assignment) bool {
				return x.Owner == y.Owner && slices.Equal(x.IPs, y.IPs)
			}) {
				t.Errorf("refused: got %v, want %v", refused, tc.wantRefused)
			}
			if got := a.Assigned("stale"); len(got) != 0 {
				t.Errorf("stale owner: got %v, want nothing after rebuild", got)
			}
			for owner, ips := range tc.wantHeld {
				if got := a.Assigned(owner); !slices.Equal(got, addrs(ips...)) {
					t.Errorf("%s: got %v, want %v", owner, got, ips)
				}
			}
		})
	}
}
