package cidrflag

import (
	"net/netip"
	"slices"
	"testing"

	"github.com/spf13/pflag"
)

func TestParse(t *testing.T) {
	tests := []struct {
		name    string
		value   string
		want    []string
		wantErr string
	}{
		{name: "empty", value: ""},
		{name: "blank", value: "  "},
		{name: "one IPv4", value: "10.244.0.0/16", want: []string{"10.244.0.0/16"}},
		{name: "one IPv6", value: "fd00:10:244::/56", want: []string{"fd00:10:244::/56"}},
		{name: "dual-stack, order kept", value: "fd00:10:244::/56, 10.244.0.0/16", want: []string{"fd00:10:244::/56", "10.244.0.0/16"}},
		{name: "single address", value: "10.0.0.1/32", want: []string{"10.0.0.1/32"}},
		{name: "IPv4 host bits", value: "10.244.1.0/16",
			wantErr: "--cluster-cidr: 10.244.1.0/16 has host bits set (did you mean 10.244.0.0/16?)"},
		{name: "IPv6 host bits", value: "10.244.0.0/16,fd00:10:244::1/56",
			wantErr: "--cluster-cidr: fd00:10:244::1/56 has host bits set (did you mean fd00:10:244::/56?)"},
		{name: "two IPv4", value: "10.244.0.0/16,10.245.0.0/16",
			wantErr: "--cluster-cidr: at most one range per IP family: 10.244.0.0/16 and 10.245.0.0/16 are both IPv4"},
		{name: "two IPv6", value: "fd00::/64,fd01::/64",
			wantErr: "--cluster-cidr: at most one range per IP family: fd00::/64 and fd01::/64 are both IPv6"},
		{name: "three", value: "10.244.0.0/16,fd00::/64,10.245.0.0/16",
			wantErr: "--cluster-cidr: at most one range per IP family: 10.244.0.0/16 and 10.245.0.0/16 are both IPv4"},
		{name: "not a CIDR", value: "pods",
			wantErr: `--cluster-cidr: "pods" is not a CIDR (want one like 10.244.0.0/16 or fd00:10:244::/56)`},
		{name: "address without length", value: "10.244.0.0",
			wantErr: `--cluster-cidr: "10.244.0.0" is not a CIDR (want one like 10.244.0.0/16 or fd00:10:244::/56)`},
		{name: "length out of range", value: "10.0.0.0/33",
			wantErr: `--cluster-cidr: "10.0.0.0/33" is not a CIDR (want one like 10.244.0.0/16 or fd00:10:244::/56)`},
		{name: "trailing comma", value: "10.244.0.0/16,",
			wantErr: "--cluster-cidr: empty item in the list"},
		{name: "IPv4-mapped IPv6", value: "::ffff:10.0.0.0/104",
			wantErr: "--cluster-cidr: ::ffff:10.0.0.0/104 is an IPv4-mapped IPv6 CIDR; write the IPv4 CIDR"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Parse("--cluster-cidr", tc.value)
			if tc.wantErr != "" {
				if err == nil || err.Error() != tc.wantErr {
					t.Fatalf("got error %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("got error %v, want none", err)
			}
			if g := strs(got); !slices.Equal(g, tc.want) {
				t.Errorf("got %q, want %q", g, tc.want)
			}
		})
	}
}

// The flag form refuses what Parse refuses, with the same words, and pflag
// names the flag.
func TestValue(t *testing.T) {
	def := []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")}
	got := def
	fs := pflag.NewFlagSet("test", pflag.ContinueOnError)
	fs.Var(NewValue(&got), "pod-cidr", "pod ranges")
	if d := fs.Lookup("pod-cidr").DefValue; d != "10.0.0.0/8" {
		t.Errorf("default: got %q, want %q", d, "10.0.0.0/8")
	}
	if err := fs.Parse([]string{"--pod-cidr", "10.244.1.0/24,fd00::/64"}); err != nil {
		t.Fatal(err)
	}
	if g, want := strs(got), []string{"10.244.1.0/24", "fd00::/64"}; !slices.Equal(g, want) {
		t.Errorf("got %q, want %q", g, want)
	}
	err := fs.Parse([]string{"--pod-cidr", "10.244.1.0/16"})
	want := `invalid argument "10.244.1.0/16" for "--pod-cidr" flag: 10.244.1.0/16 has host bits set (did you mean 10.244.0.0/16?)`
	if err == nil || err.Error() != want {
		t.Errorf("got error %v, want %q", err, want)
	}
}

func strs(ps []netip.Prefix) []string {
	var out []string
	for _, p := range ps {
		out = append(out, p.String())
	}
	return out
}
