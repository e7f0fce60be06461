package servicelb

import (
	"net/netip"
	"strings"
	"testing"
)

func TestParsePools(t *testing.T) {
	tests := []struct {
		name    string
		in      string
		want    string // Pools.String of the result
		wantErr string // part of the error, naming the bad item
	}{
		{name: "empty", in: "", want: ""},
		{name: "IPv4 /24 skips network and broadcast", in: "192.0.2.0/24", want: "192.0.2.1-192.0.2.254"},
		{name: "IPv4 /30 skips network and broadcast", in: "192.0.2.4/30", want: "192.0.2.5-192.0.2.6"},
		{name: "IPv4 /31 is used whole", in: "192.0.2.4/31", want: "192.0.2.4-192.0.2.5"},
		{name: "IPv4 /32 is one address", in: "192.0.2.7/32", want: "192.0.2.7"},
		{name: "IPv6 CIDR is used whole", in: "2001:db8::/120", want: "2001:db8::-2001:db8::ff"},
		{name: "range", in: "192.0.2.10-192.0.2.20", want: "192.0.2.10-192.0.2.20"},
		{name: "IPv6 range", in: "2001:db8::10 - 2001:db8::1f", want: "2001:db8::10-2001:db8::1f"},
		{name: "single address", in: "198.51.100.7", want: "198.51.100.7"},
		{name: "mixed list with spaces", in: " 192.0.2.0/30 , 2001:db8::/126,198.51.100.1-198.51.100.2",
			want: "192.0.2.1-192.0.2.2,2001:db8::-2001:db8::3,198.51.100.1-198.51.100.2"},
		{name: "bad CIDR", in: "192.0.2.0/24,192.0.2.0/33", wantErr: `"192.0.2.0/33"`},
		{name: "host bits", in: "192.0.2.5/24", wantErr: `"192.0.2.5/24": host bits set; did you mean 192.0.2.0/24?`},
		{name: "mixed families in a range", in: "192.0.2.1-2001:db8::1", wantErr: "different IP families"},
		{name: "reversed range", in: "192.0.2.20-192.0.2.10", wantErr: `"192.0.2.20-192.0.2.10": the first address is above the last`},
		{name: "not an address", in: "pool-a", wantErr: `"pool-a"`},
		{name: "empty item", in: "192.0.2.0/24,,", wantErr: "empty item"},
		{name: "overlap", in: "192.0.2.0/24,192.0.2.100-192.0.2.110", wantErr: `"192.0.2.100-192.0.2.110": overlaps 192.0.2.1-192.0.2.254`},
		{name: "contained overlap", in: "192.0.2.100-192.0.2.110,192.0.2.0/24", wantErr: "overlaps"},
		{name: "zone", in: "fe80::1%eth0-fe80::2", wantErr: "zones are not allowed"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParsePools(tc.in)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("got error %v, want one containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("got error %v, want none", err)
			}
			if got.String() != tc.want {
				t.Errorf("got %q, want %q", got.String(), tc.want)
			}
		})
	}
}

func TestPoolsContains(t *testing.T) {
	pools := mustPools(t, "192.0.2.0/30,2001:db8::/127")
	for _, tc := range []struct {
		ip   string
		want bool
	}{
		{"192.0.2.0", false}, {"192.0.2.1", true}, {"192.0.2.2", true}, {"192.0.2.3", false},
		{"2001:db8::", true}, {"2001:db8::1", true}, {"2001:db8::2", false}, {"::ffff:192.0.2.1", false},
	} {
		if got := pools.Contains(netip.MustParseAddr(tc.ip)); got != tc.want {
			t.Errorf("Contains(%s): got %v, want %v", tc.ip, got, tc.want)
		}
	}
}

func mustPools(t *testing.T, s string) Pools {
	t.Helper()
	p, err := ParsePools(s)
	if err != nil {
		t.Fatal(err)
	}
	return p
}
