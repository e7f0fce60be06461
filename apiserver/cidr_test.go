package apiserver

import (
	"fmt"
	"strings"
	"testing"
)

func TestParseServiceCIDRs(t *testing.T) {
	for _, tc := range []struct {
		in        string
		wantFirst string
		wantErr   bool
	}{
		{"10.96.0.0/12", "10.96.0.1", false},
		{"10.96.0.0/12,fd00:10:96::/112", "10.96.0.1", false},
		{"fd00::/108", "fd00::1", false},
		{"10.96.0.1/12", "", true},
		{"10.0.0.0/8,10.1.0.0/16", "", true},
		{"10.0.0.0/31", "", true},
		{"nonsense", "", true},
		{"", "", true},
	} {
		t.Run(tc.in, func(t *testing.T) {
			got, err := ParseServiceCIDRs(tc.in)
			if (err != nil) != tc.wantErr {
				t.Fatalf("err: got %v, want error %v", err, tc.wantErr)
			}
			if err == nil && FirstServiceIP(got[0]).String() != tc.wantFirst {
				t.Fatalf("first IP: got %s, want %s", FirstServiceIP(got[0]), tc.wantFirst)
			}
		})
	}
}

func TestParseExternalIPCIDRs(t *testing.T) {
	for _, tc := range []struct {
		name    string
		in      []string
		want    string
		wantErr string
	}{
		{name: "none", in: nil, want: "[]"},
		{name: "several of one family", in: []string{"203.0.113.0/24", "198.51.100.0/24", "2001:db8::/64"},
			want: "[203.0.113.0/24 198.51.100.0/24 2001:db8::/64]"},
		{name: "host bits", in: []string{"203.0.113.1/24"}, wantErr: "--service-external-ip-cidrs: 203.0.113.1/24 has host bits set (did you mean 203.0.113.0/24?)"},
		{name: "not a CIDR", in: []string{"203.0.113.1"}, wantErr: `--service-external-ip-cidrs: "203.0.113.1" is not a CIDR`},
		{name: "empty item", in: []string{""}, wantErr: "--service-external-ip-cidrs: empty item"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParseExternalIPCIDRs(tc.in)
			if tc.wantErr != "" {
				if err == nil || !strings.HasPrefix(err.Error(), tc.wantErr) {
					t.Fatalf("got error %v, want one starting %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if s := fmt.Sprint(got); s != tc.want {
				t.Fatalf("got %s, want %s", s, tc.want)
			}
		})
	}
}
