package family

import (
	"context"
	"errors"
	"net/netip"
	"slices"
	"testing"

	"portal.dev/portal/proxy/snapshot"
)

// fakeProxier records the calls it gets, failing each with err.
type fakeProxier struct {
	name  string
	calls *[]string
	err   error
}

func (f *fakeProxier) Sync(context.Context, snapshot.Request) error {
	*f.calls = append(*f.calls, f.name+" sync")
	return f.err
}

func (f *fakeProxier) Cleanup(context.Context) error {
	*f.calls = append(*f.calls, f.name+" cleanup")
	return f.err
}

func TestSet(t *testing.T) {
	var calls []string
	errV4 := errors.New("v4 failed")
	s := &Set[*fakeProxier]{
		Families: []*fakeProxier{{"ipv4", &calls, errV4}, {"ipv6", &calls, nil}},
		BeforeFirstSync: func(context.Context) error {
			calls = append(calls, "before")
			return errors.New("leftovers stay")
		},
	}
	ctx := context.Background()
	for range 2 {
		if err := s.Sync(ctx, snapshot.Request{}); !errors.Is(err, errV4) {
			t.Errorf("Sync: got %v, want %v", err, errV4)
		}
	}
	if err := s.Cleanup(ctx); !errors.Is(err, errV4) {
		t.Errorf("Cleanup: got %v, want %v", err, errV4)
	}
	// The hook runs once, its failure stops nothing, and a failed
	// family does not keep the other from syncing.
	want := []string{"before", "ipv4 sync", "ipv6 sync", "ipv4 sync", "ipv6 sync", "ipv4 cleanup", "ipv6 cleanup"}
	if !slices.Equal(calls, want) {
		t.Errorf("got calls %v, want %v", calls, want)
	}
}

func TestClusterCIDR(t *testing.T) {
	v4, v6 := netip.MustParsePrefix("10.244.0.0/16"), netip.MustParsePrefix("fd00:10:244::/48")
	for _, tc := range []struct {
		name  string
		cidrs []netip.Prefix
		f     snapshot.Family
		want  netip.Prefix
	}{
		{"IPv4 of dual-stack", []netip.Prefix{v4, v6}, "IPv4", v4},
		{"IPv6 of dual-stack", []netip.Prefix{v4, v6}, "IPv6", v6},
		{"family not given", []netip.Prefix{v4}, "IPv6", netip.Prefix{}},
		{"none", nil, "IPv4", netip.Prefix{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := ClusterCIDR(tc.cidrs, tc.f); got != tc.want {
				t.Errorf("got %v, want %v", got, tc.want)
			}
		})
	}
}
