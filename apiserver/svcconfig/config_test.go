package svcconfig

import (
	"net/netip"
	"reflect"
	"testing"

	corev1 "k8s.io/api/core/v1"
)

func TestServiceConfigFamilies(t *testing.T) {
	cases := []struct {
		name    string
		ranges  []string
		want    []corev1.IPFamily
		dual    bool
		primary corev1.IPFamily
	}{
		{name: "zero value is IPv4", want: []corev1.IPFamily{corev1.IPv4Protocol}, primary: corev1.IPv4Protocol},
		{name: "IPv6 only", ranges: []string{"fd00::/108"}, want: []corev1.IPFamily{corev1.IPv6Protocol}, primary: corev1.IPv6Protocol},
		{name: "dual-stack IPv6 first", ranges: []string{"fd00::/108", "10.0.0.0/16"},
			want: []corev1.IPFamily{corev1.IPv6Protocol, corev1.IPv4Protocol}, dual: true, primary: corev1.IPv6Protocol},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var cfg ServiceConfig
			for _, r := range tc.ranges {
				cfg.ClusterIPRanges = append(cfg.ClusterIPRanges, netip.MustParsePrefix(r))
			}
			if got := cfg.Families(); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("Families: got %v, want %v", got, tc.want)
			}
			if got := cfg.DualStack(); got != tc.dual {
				t.Errorf("DualStack: got %v, want %v", got, tc.dual)
			}
			if got := cfg.PrimaryFamily(); got != tc.primary {
				t.Errorf("PrimaryFamily: got %v, want %v", got, tc.primary)
			}
		})
	}
}

func TestPortRange(t *testing.T) {
	cases := []struct {
		name string
		r    PortRange
		port int
		in   bool
		str  string
	}{
		{name: "zero means default", r: PortRange{}, port: 30000, in: true, str: "30000-32767"},
		{name: "default top", r: PortRange{}, port: 32767, in: true, str: "30000-32767"},
		{name: "past default top", r: PortRange{}, port: 32768, in: false, str: "30000-32767"},
		{name: "custom", r: PortRange{Base: 20000, Size: 10}, port: 20010, in: false, str: "20000-20009"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := tc.r.OrDefault()
			if got := r.Contains(tc.port); got != tc.in {
				t.Errorf("Contains(%d): got %v, want %v", tc.port, got, tc.in)
			}
			if got := r.String(); got != tc.str {
				t.Errorf("String: got %q, want %q", got, tc.str)
			}
		})
	}
}
