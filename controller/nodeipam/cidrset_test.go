package nodeipam

import (
	"errors"
	"net/netip"
	"testing"
)

func TestCIDRSet(t *testing.T) {
	mp := netip.MustParsePrefix
	type step struct {
		op   string // allocate, occupy, release
		p    string
		want string // allocated prefix, or "error"
	}
	cases := []struct {
		name    string
		cluster string
		mask    int
		steps   []step
	}{
		{"v4 in order", "10.244.0.0/16", 24, []step{
			{"allocate", "", "10.244.0.0/24"},
			{"allocate", "", "10.244.1.0/24"},
		}},
		{"occupied subnets are skipped", "10.244.0.0/16", 24, []step{
			{"occupy", "10.244.0.0/24", ""},
			{"occupy", "10.244.1.0/24", ""},
			{"allocate", "", "10.244.2.0/24"},
		}},
		{"released subnet is not reused at once", "10.244.0.0/22", 24, []step{
			{"allocate", "", "10.244.0.0/24"},
			{"allocate", "", "10.244.1.0/24"},
			{"release", "10.244.0.0/24", ""},
			{"allocate", "", "10.244.2.0/24"},
			{"allocate", "", "10.244.3.0/24"},
			{"allocate", "", "10.244.0.0/24"},
			{"allocate", "", "error"},
		}},
		{"full", "10.0.0.0/24", 25, []step{
			{"allocate", "", "10.0.0.0/25"},
			{"allocate", "", "10.0.0.128/25"},
			{"allocate", "", "error"},
			{"release", "10.0.0.128/25", ""},
			{"allocate", "", "10.0.0.128/25"},
		}},
		{"foreign prefixes refused", "10.244.0.0/16", 24, []step{
			{"occupy", "10.245.0.0/24", "error"},
			{"occupy", "10.244.0.0/23", "error"},
			{"occupy", "10.244.0.1/24", "error"},
		}},
		{"v6", "fd00:10:244::/56", 64, []step{
			{"allocate", "", "fd00:10:244::/64"},
			{"occupy", "fd00:10:244:1::/64", ""},
			{"allocate", "", "fd00:10:244:2::/64"},
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s, err := NewCIDRSet(mp(tc.cluster), tc.mask)
			if err != nil {
				t.Fatal(err)
			}
			for i, st := range tc.steps {
				var got string
				var err error
				switch st.op {
				case "allocate":
					var p netip.Prefix
					p, err = s.Allocate()
					got = p.String()
					if err != nil && !errors.Is(err, ErrFull) {
						t.Errorf("step %d: got error %v, want ErrFull", i, err)
					}
				case "occupy":
					err = s.Occupy(mp(st.p))
				case "release":
					err = s.Release(mp(st.p))
				}
				if err != nil {
					got = "error"
				} else if st.op != "allocate" {
					got = ""
				}
				if got != st.want {
					t.Errorf("step %d (%s %s): got %q (%v), want %q", i, st.op, st.p, got, err, st.want)
				}
			}
		})
	}
}

func TestNewCIDRSetErrors(t *testing.T) {
	cases := []struct {
		cluster string
		mask    int
	}{
		{"10.0.0.0/16", 8},
		{"10.0.0.0/16", 33},
		{"10.0.0.0/8", 28},
	}
	for _, tc := range cases {
		if _, err := NewCIDRSet(netip.MustParsePrefix(tc.cluster), tc.mask); err == nil {
			t.Errorf("NewCIDRSet(%s, %d): got no error, want one", tc.cluster, tc.mask)
		}
	}
}
