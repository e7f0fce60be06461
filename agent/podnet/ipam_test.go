package podnet

import (
	"errors"
	"net/netip"
	"testing"
)

func TestIPAM(t *testing.T) {
	type step struct {
		op, id string // allocate, release
		want   string // address, "" for release, "exhausted"
	}
	cases := []struct {
		name  string
		cidr  string
		steps []step
	}{
		{"v4 skips network, gateway and broadcast, wraps, reuses last", "10.244.1.0/29", []step{
			{"allocate", "a", "10.244.1.2"},
			{"allocate", "b", "10.244.1.3"},
			{"allocate", "a", "10.244.1.2"},
			{"allocate", "c", "10.244.1.4"},
			{"allocate", "d", "10.244.1.5"},
			{"allocate", "e", "10.244.1.6"},
			{"allocate", "f", "exhausted"},
			{"release", "b", ""},
			{"allocate", "f", "10.244.1.3"},
		}},
		{"a released address is not reused at once", "10.244.1.0/24", []step{
			{"allocate", "a", "10.244.1.2"},
			{"release", "a", ""},
			{"allocate", "b", "10.244.1.3"},
		}},
		{"v6", "fd00:10:244:1::/64", []step{
			{"allocate", "a", "fd00:10:244:1::2"},
			{"allocate", "b", "fd00:10:244:1::3"},
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			m := IPAM{Dir: t.TempDir()}
			cidr := netip.MustParsePrefix(tc.cidr)
			for i, st := range tc.steps {
				var got string
				switch st.op {
				case "allocate":
					a, err := m.Allocate(cidr, st.id)
					got = a.String()
					if errors.Is(err, ErrExhausted) {
						got = "exhausted"
					} else if err != nil {
						t.Fatalf("step %d: %v", i, err)
					}
				case "release":
					if err := m.Release(cidr, st.id); err != nil {
						t.Fatalf("step %d: %v", i, err)
					}
				}
				if got != st.want {
					t.Errorf("step %d (%s %s): got %s, want %s", i, st.op, st.id, got, st.want)
				}
			}
		})
	}
}

// TestIPAMPersists pins that allocations survive a restart (a new IPAM on
// the same directory), so a re-adopted pod keeps its address.
func TestIPAMPersists(t *testing.T) {
	dir := t.TempDir()
	cidr := netip.MustParsePrefix("10.244.0.0/24")
	a, err := IPAM{Dir: dir}.Allocate(cidr, "pod-a")
	if err != nil {
		t.Fatal(err)
	}
	again := IPAM{Dir: dir}
	if got, _ := again.Allocate(cidr, "pod-a"); got != a {
		t.Errorf("same owner after restart: got %s, want %s", got, a)
	}
	if got, _ := again.Allocate(cidr, "pod-b"); got == a {
		t.Errorf("new owner after restart: got %s, the address pod-a holds", got)
	}
	owners, _ := again.Owners(cidr)
	if len(owners) != 2 || owners["pod-a"] != a {
		t.Errorf("owners: got %v, want pod-a=%s and pod-b", owners, a)
	}
}

func TestIPAMExhaustedFromScratch(t *testing.T) {
	m := IPAM{Dir: t.TempDir()}
	cidr := netip.MustParsePrefix("10.0.0.0/30") // .1 gateway, .2 the only pod address
	if a, err := m.Allocate(cidr, "a"); err != nil || a.String() != "10.0.0.2" {
		t.Fatalf("got %v, %v, want 10.0.0.2", a, err)
	}
	m2 := IPAM{Dir: t.TempDir()}
	m2.Allocate(cidr, "x")
	if _, err := m2.Allocate(cidr, "y"); !errors.Is(err, ErrExhausted) {
		t.Errorf("got %v, want ErrExhausted", err)
	}
}
