package servicelb

import (
	"errors"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestRequests(t *testing.T) {
	dual := []corev1.IPFamily{v4, v6}
	tests := []struct {
		name       string
		families   []corev1.IPFamily
		clusterIPs []string
		lbIP       string
		annotation *string
		pools      string
		want       []Request
		wantErr    error
	}{
		{name: "single stack", families: []corev1.IPFamily{v4}, pools: "192.0.2.0/24", want: []Request{auto(v4)}},
		{name: "dual stack, both pools", families: []corev1.IPFamily{v6, v4}, pools: "192.0.2.0/24,2001:db8::/64", want: []Request{auto(v6), auto(v4)}},
		{name: "dual stack, IPv4 pool only", families: dual, pools: "192.0.2.0/24", want: []Request{auto(v4)}},
		{name: "no pool for the family", families: []corev1.IPFamily{v6}, pools: "192.0.2.0/24", wantErr: ErrNoPool},
		{name: "families from cluster IPs", clusterIPs: []string{"fd00::1"}, pools: "2001:db8::/64", want: []Request{auto(v6)}},
		{name: "IPv4 by default", pools: "192.0.2.0/24", want: []Request{auto(v4)}},
		{name: "spec.loadBalancerIP", families: dual, lbIP: "192.0.2.7", pools: "192.0.2.0/24,2001:db8::/64", want: []Request{want("192.0.2.7")}},
		{name: "annotation, one per family, in family order", families: dual, annotation: ptr("2001:db8::7, 192.0.2.7"), pools: "192.0.2.0/24",
			want: []Request{want("192.0.2.7"), want("2001:db8::7")}},
		{name: "annotation and agreeing spec", families: dual, lbIP: "192.0.2.7", annotation: ptr("192.0.2.7,2001:db8::7"),
			want: []Request{want("192.0.2.7"), want("2001:db8::7")}},
		{name: "annotation and disagreeing spec", families: dual, lbIP: "192.0.2.8", annotation: ptr("192.0.2.7"), wantErr: ErrInvalidRequest},
		{name: "not an address", families: dual, annotation: ptr("192.0.2.7,nope"), wantErr: ErrInvalidRequest},
		{name: "empty annotation", families: dual, annotation: ptr(""), wantErr: ErrInvalidRequest},
		{name: "bad spec.loadBalancerIP", families: dual, lbIP: "192.0.2.300", wantErr: ErrInvalidRequest},
		{name: "two of a family", families: dual, annotation: ptr("192.0.2.7,192.0.2.8"), wantErr: ErrInvalidRequest},
		{name: "family the Service lacks", families: []corev1.IPFamily{v4}, annotation: ptr("2001:db8::7"), wantErr: ErrInvalidRequest},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			svc := &corev1.Service{
				ObjectMeta: metav1.ObjectMeta{Name: "s", Namespace: "ns"},
				Spec:       corev1.ServiceSpec{IPFamilies: tc.families, ClusterIPs: tc.clusterIPs, LoadBalancerIP: tc.lbIP},
			}
			if tc.annotation != nil {
				svc.Annotations = map[string]string{AnnotationIPs: *tc.annotation}
			}
			got, err := requests(svc, mustPools(t, tc.pools))
			if !errors.Is(err, tc.wantErr) {
				t.Fatalf("got error %v, want %v", err, tc.wantErr)
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("got %v, want %v", got, tc.want)
			}
		})
	}
}

func ptr[T any](v T) *T { return &v }
