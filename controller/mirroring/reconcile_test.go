package mirroring

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
)

// existing turns desired slices into stored ones named <prefix><i>.
func existing(prefix string, in []*discoveryv1.EndpointSlice) []*discoveryv1.EndpointSlice {
	out := make([]*discoveryv1.EndpointSlice, len(in))
	for i, s := range in {
		out[i] = s.DeepCopy()
		out[i].GenerateName = ""
		out[i].Name = fmt.Sprintf("%s%d", prefix, i)
		out[i].ResourceVersion = "7"
	}
	return out
}

// summary prints a plan as "create=N update=name@rv,... delete=name,...".
func summary(p Plan) string {
	var upd, del []string
	for _, s := range p.Update {
		upd = append(upd, s.Name+"@"+s.ResourceVersion)
	}
	for _, s := range p.Delete {
		del = append(del, s.Name)
	}
	return fmt.Sprintf("create=%d update=%s delete=%s", len(p.Create), strings.Join(upd, ","), strings.Join(del, ","))
}

func TestReconcile(t *testing.T) {
	v4 := endpointsObj("ext", subset([]string{"192.0.2.1"}, nil, tcp("a", 1)))
	v4more := endpointsObj("ext", subset([]string{"192.0.2.1", "192.0.2.2"}, nil, tcp("a", 1)))
	v4otherPort := endpointsObj("ext", subset([]string{"192.0.2.1"}, nil, tcp("b", 2)))
	dual := endpointsObj("ext", subset([]string{"192.0.2.1", "2001:db8::1"}, nil, tcp("a", 1)))
	want := func(ep *corev1.Endpoints) []*discoveryv1.EndpointSlice { s, _ := Desired(ep, 1000); return s }
	relabelled := existing("old-", want(v4))
	relabelled[0].Labels["team"] = "b"
	reversioned := existing("old-", want(v4))
	reversioned[0].Endpoints[0].TargetRef = &corev1.ObjectReference{Kind: "Pod", Name: "p", ResourceVersion: "9"}
	reversionedWant := want(v4)
	reversionedWant[0].Endpoints[0].TargetRef = &corev1.ObjectReference{Kind: "Pod", Name: "p", ResourceVersion: "1"}

	tests := []struct {
		name     string
		desired  []*discoveryv1.EndpointSlice
		existing []*discoveryv1.EndpointSlice
		want     string
	}{
		{"nothing yet", want(dual), nil, "create=2 update= delete="},
		{"already mirrored", want(dual), existing("old-", want(dual)), "create=0 update= delete="},
		{"an address added", want(v4more), existing("old-", want(v4)), "create=0 update=old-0@7 delete="},
		{"a label changed", want(v4), relabelled, "create=0 update=old-0@7 delete="},
		{"only a target resourceVersion differs", reversionedWant, reversioned, "create=0 update= delete="},
		{"duplicates are deleted, the first by name kept",
			want(v4), append(existing("old-", want(v4)), existing("dup-", want(v4))...), "create=0 update= delete=old-0"},
		{"nothing wanted", nil, existing("old-", want(dual)), "create=0 update= delete=old-0,old-1"},
		{"ports changed: the old slice is reused", want(v4otherPort), existing("old-", want(v4)),
			"create=0 update=old-0@7 delete="},
		{"an IPv6 slice is not reused for IPv4", want(v4), existing("old-", want(dual))[1:], "create=1 update= delete=old-1"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			before := render(tc.existing)
			got := Reconcile(tc.desired, tc.existing)
			if s := summary(got); s != tc.want {
				t.Errorf("got %s, want %s", s, tc.want)
			}
			if after := render(tc.existing); after != before {
				t.Errorf("got existing slices modified to %s, want %s", after, before)
			}
			for _, u := range got.Update {
				if u.GenerateName != "" || !slices.ContainsFunc(tc.existing, func(e *discoveryv1.EndpointSlice) bool { return e.Name == u.Name }) {
					t.Errorf("got update of %q (generateName %q), want an update of an existing slice", u.Name, u.GenerateName)
				}
			}
		})
	}
}
