package endpoints

import (
	"fmt"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
)

// addrs returns n addresses 10.<block>.x.y.
func addrs(block, n int) []corev1.EndpointAddress {
	out := make([]corev1.EndpointAddress, n)
	for i := range out {
		out[i] = corev1.EndpointAddress{IP: fmt.Sprintf("10.%d.%d.%d", block, i/250, i%250+1)}
	}
	return out
}

func TestTruncate(t *testing.T) {
	type counts struct{ ready, notReady []int }
	tests := []struct {
		name          string
		in            []corev1.EndpointSubset
		limit         int
		want          counts
		wantTruncated bool
	}{{
		name:  "at capacity nothing is cut",
		in:    []corev1.EndpointSubset{{Addresses: addrs(1, 600), NotReadyAddresses: addrs(2, 400)}},
		limit: 1000,
		want:  counts{[]int{600}, []int{400}},
	}, {
		name:          "not-ready addresses are cut before ready ones",
		in:            []corev1.EndpointSubset{{Addresses: addrs(1, 900), NotReadyAddresses: addrs(2, 300)}},
		limit:         1000,
		want:          counts{[]int{900}, []int{100}},
		wantTruncated: true,
	}, {
		name: "too many ready addresses drop every not-ready one",
		in: []corev1.EndpointSubset{
			{Addresses: addrs(1, 1001), NotReadyAddresses: addrs(2, 5)},
		},
		limit:         1000,
		want:          counts{[]int{1000}, []int{0}},
		wantTruncated: true,
	}, {
		name: "the cut is spread over subsets in proportion",
		in: []corev1.EndpointSubset{
			{Addresses: addrs(1, 900), Ports: []corev1.EndpointPort{port("a", 1)}},
			{Addresses: addrs(2, 300), Ports: []corev1.EndpointPort{port("b", 2)}},
		},
		limit:         1000,
		want:          counts{[]int{750, 250}, []int{0, 0}},
		wantTruncated: true,
	}, {
		name: "shares round up, so the last subset takes what is left",
		in: []corev1.EndpointSubset{
			{NotReadyAddresses: addrs(1, 5), Ports: []corev1.EndpointPort{port("a", 1)}},
			{NotReadyAddresses: addrs(2, 5), Ports: []corev1.EndpointPort{port("b", 2)}},
			{NotReadyAddresses: addrs(3, 5), Ports: []corev1.EndpointPort{port("c", 3)}},
		},
		limit:         10,
		want:          counts{[]int{0, 0, 0}, []int{4, 4, 2}},
		wantTruncated: true,
	}, {
		name: "subsets left empty are dropped",
		in: []corev1.EndpointSubset{
			{Addresses: addrs(1, 10), Ports: []corev1.EndpointPort{port("a", 1)}},
			{NotReadyAddresses: addrs(2, 10), Ports: []corev1.EndpointPort{port("b", 2)}},
		},
		limit:         10,
		want:          counts{[]int{10}, []int{0}},
		wantTruncated: true,
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, truncated := Truncate(tc.in, tc.limit)
			var c counts
			for _, s := range got {
				c.ready = append(c.ready, len(s.Addresses))
				c.notReady = append(c.notReady, len(s.NotReadyAddresses))
			}
			if !slices.Equal(c.ready, tc.want.ready) || !slices.Equal(c.notReady, tc.want.notReady) {
				t.Errorf("got ready %v notReady %v, want ready %v notReady %v",
					c.ready, c.notReady, tc.want.ready, tc.want.notReady)
			}
			if truncated != tc.wantTruncated {
				t.Errorf("got truncated %v, want %v", truncated, tc.wantTruncated)
			}
		})
	}
}
