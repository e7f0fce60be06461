package endpoints

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/types"
)

func addr(ip, podName string) corev1.EndpointAddress {
	return corev1.EndpointAddress{IP: ip, TargetRef: &corev1.ObjectReference{
		Kind: "Pod", Name: podName, UID: types.UID("uid-" + podName)}}
}

func port(name string, n int32) corev1.EndpointPort {
	return corev1.EndpointPort{Name: name, Port: n, Protocol: corev1.ProtocolTCP}
}

func TestRepack(t *testing.T) {
	tests := []struct {
		name string
		in   []corev1.EndpointSubset
		want string
	}{{
		name: "same port merges and sorts numerically",
		in: []corev1.EndpointSubset{
			{Addresses: []corev1.EndpointAddress{addr("10.0.0.10", "b")}, Ports: []corev1.EndpointPort{port("p", 80)}},
			{Addresses: []corev1.EndpointAddress{addr("10.0.0.9", "a")}, Ports: []corev1.EndpointPort{port("p", 80)}},
		},
		want: "[p:80/TCP] ready=10.0.0.9(a),10.0.0.10(b) notReady=",
	}, {
		name: "not ready wins over ready on the same port",
		in: []corev1.EndpointSubset{
			{Addresses: []corev1.EndpointAddress{addr("10.0.0.1", "a")}, Ports: []corev1.EndpointPort{port("p", 80)}},
			{NotReadyAddresses: []corev1.EndpointAddress{addr("10.0.0.1", "a")}, Ports: []corev1.EndpointPort{port("p", 80)}},
		},
		want: "[p:80/TCP] ready= notReady=10.0.0.1(a)",
	}, {
		name: "ports with the same addresses share a subset",
		in: []corev1.EndpointSubset{
			{Addresses: []corev1.EndpointAddress{addr("10.0.0.1", "a")}, Ports: []corev1.EndpointPort{port("q", 90)}},
			{Addresses: []corev1.EndpointAddress{addr("10.0.0.1", "a")}, Ports: []corev1.EndpointPort{port("p", 80)}},
			{Addresses: []corev1.EndpointAddress{addr("10.0.0.2", "b")}, Ports: []corev1.EndpointPort{port("r", 70)}},
		},
		want: "[r:70/TCP] ready=10.0.0.2(b) notReady= | [p:80/TCP,q:90/TCP] ready=10.0.0.1(a) notReady=",
	}, {
		name: "same IP with different pods stays two addresses",
		in: []corev1.EndpointSubset{
			{Addresses: []corev1.EndpointAddress{addr("10.0.0.1", "b"), addr("10.0.0.1", "a")},
				Ports: []corev1.EndpointPort{port("p", 80)}},
		},
		want: "[p:80/TCP] ready=10.0.0.1(a),10.0.0.1(b) notReady=",
	}, {
		name: "subsets without ports come first",
		in: []corev1.EndpointSubset{
			{Addresses: []corev1.EndpointAddress{addr("10.0.0.2", "b")}, Ports: []corev1.EndpointPort{port("p", 80)}},
			{Addresses: []corev1.EndpointAddress{addr("10.0.0.1", "a")}},
		},
		want: "[] ready=10.0.0.1(a) notReady= | [p:80/TCP] ready=10.0.0.2(b) notReady=",
	}, {
		name: "ports without addresses are dropped",
		in:   []corev1.EndpointSubset{{Ports: []corev1.EndpointPort{port("p", 80)}}},
		want: "",
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := Repack(tc.in)
			if s := render(got); s != tc.want {
				t.Errorf("got  %s\nwant %s", s, tc.want)
			}
			if again := Repack(got); !equality.Semantic.DeepEqual(again, got) {
				t.Errorf("repacking again: got %s, want %s (unchanged)", render(again), render(got))
			}
		})
	}
}

func TestRepackDoesNotModifyInput(t *testing.T) {
	in := []corev1.EndpointSubset{{
		Addresses: []corev1.EndpointAddress{addr("10.0.0.2", "b"), addr("10.0.0.1", "a")},
		Ports:     []corev1.EndpointPort{port("q", 90), port("p", 80)},
	}}
	before := render(in)
	Repack(in)
	if after := render(in); after != before {
		t.Errorf("got input %s after Repack, want %s", after, before)
	}
}
