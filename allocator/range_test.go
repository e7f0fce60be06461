package allocator

import (
	"errors"
	"net/netip"
	"testing"

	"portal.dev/portal/apiserver/svcconfig"
)

func TestCheckIP(t *testing.T) {
	v4 := svcconfig.ServiceConfig{ClusterIPRanges: []netip.Prefix{netip.MustParsePrefix("10.0.0.0/24")}}
	dual := svcconfig.ServiceConfig{ClusterIPRanges: []netip.Prefix{
		netip.MustParsePrefix("10.0.0.0/24"), netip.MustParsePrefix("fd00::/108")}}
	defaultRange := svcconfig.ServiceConfig{ClusterIPRanges: []netip.Prefix{netip.MustParsePrefix("10.96.0.0/12")}}
	v6Wide := svcconfig.ServiceConfig{ClusterIPRanges: []netip.Prefix{netip.MustParsePrefix("fd00:0:0:1::/64")}}
	cases := []struct {
		name string
		cfg  svcconfig.ServiceConfig
		ip   string
		want string // "" when the address may be requested
	}{
		{name: "in range", cfg: v4, ip: "10.0.0.5"},
		{name: "out of range", cfg: v4, ip: "10.1.0.5",
			want: "the provided IP (10.1.0.5) is not in the valid range. The range of valid IPs is 10.0.0.0/24"},
		{name: "IPv6 in dual-stack range", cfg: dual, ip: "fd00::5"},
		{name: "family not configured", cfg: v4, ip: "fd00::5",
			want: "the provided IP (fd00::5) is not in the valid range. The range of valid IPs is "},
		// Upstream never hands out the network address of a range, nor the
		// broadcast address of an IPv4 one, and refuses them when asked.
		{name: "IPv4 network address", cfg: v4, ip: "10.0.0.0",
			want: "the provided IP (10.0.0.0) is not in the valid range. The range of valid IPs is 10.0.0.0/24"},
		{name: "IPv4 broadcast address", cfg: v4, ip: "10.0.0.255",
			want: "the provided IP (10.0.0.255) is not in the valid range. The range of valid IPs is 10.0.0.0/24"},
		{name: "IPv4 first host", cfg: v4, ip: "10.0.0.1"},
		{name: "IPv4 last host", cfg: v4, ip: "10.0.0.254"},
		{name: "default range network address", cfg: defaultRange, ip: "10.96.0.0",
			want: "the provided IP (10.96.0.0) is not in the valid range. The range of valid IPs is 10.96.0.0/12"},
		{name: "default range broadcast address", cfg: defaultRange, ip: "10.111.255.255",
			want: "the provided IP (10.111.255.255) is not in the valid range. The range of valid IPs is 10.96.0.0/12"},
		{name: "default range last host", cfg: defaultRange, ip: "10.111.255.254"},
		{name: "IPv6 subnet-router anycast address", cfg: dual, ip: "fd00::",
			want: "the provided IP (fd00::) is not in the valid range. The range of valid IPs is fd00::/108"},
		{name: "IPv6 last address", cfg: dual, ip: "fd00::f:ffff"},
		{name: "IPv6 last address of a /64", cfg: v6Wide, ip: "fd00:0:0:1:ffff:ffff:ffff:ffff"},
		{name: "IPv4 network address in dual-stack", cfg: dual, ip: "10.0.0.0",
			want: "the provided IP (10.0.0.0) is not in the valid range. The range of valid IPs is 10.0.0.0/24"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := New(tc.cfg, NewMemoryStore()).checkIP(netip.MustParseAddr(tc.ip))
			got := ""
			if err != nil {
				got = err.Error()
			}
			if got != tc.want {
				t.Errorf("got %q, want %q", got, tc.want)
			}
			if tc.want != "" && !errors.Is(err, ErrNotInRange) {
				t.Errorf("got %T, want an error matching ErrNotInRange", err)
			}
		})
	}
}

func TestCheckPort(t *testing.T) {
	custom := svcconfig.ServiceConfig{NodePortRange: svcconfig.PortRange{Base: 20000, Size: 100}}
	cases := []struct {
		name string
		cfg  svcconfig.ServiceConfig
		port int
		want string
	}{
		{name: "default range low end", port: 30000},
		{name: "default range high end", port: 32767},
		{name: "below default range", port: 80,
			want: "provided port is not in the valid range. The range of valid ports is 30000-32767"},
		{name: "above default range", port: 32768,
			want: "provided port is not in the valid range. The range of valid ports is 30000-32767"},
		{name: "custom range", cfg: custom, port: 20099},
		{name: "outside custom range", cfg: custom, port: 20100,
			want: "provided port is not in the valid range. The range of valid ports is 20000-20099"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := New(tc.cfg, NewMemoryStore()).checkPort(tc.port)
			got := ""
			if err != nil {
				got = err.Error()
			}
			if got != tc.want {
				t.Errorf("got %q, want %q", got, tc.want)
			}
			if tc.want != "" && !errors.Is(err, ErrNotInRange) {
				t.Errorf("got %T, want an error matching ErrNotInRange", err)
			}
		})
	}
}
