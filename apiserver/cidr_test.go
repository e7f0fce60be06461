package apiserver

import "testing"

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
