package dns

import (
	"fmt"
	"runtime"
	"testing"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"portal.dev/portal/dns/index"
)

// BenchmarkMemoryPerService reports the heap that one Service costs in
// what portal dns keeps: the slim object its informer stores and the index
// entry, for a ClusterIP Service and for a headless one with ten endpoints
// (with its EndpointSlice). bench/README.md has the goal and the current
// figures.
func BenchmarkMemoryPerService(b *testing.B) {
	const n = 10000
	for _, tc := range []struct {
		name      string
		endpoints int
	}{{"clusterIP", 0}, {"headless-10-endpoints", 10}} {
		b.Run(tc.name, func(b *testing.B) {
			for b.Loop() {
				before := heapInUse()
				x := &index.Index{}
				store := make([]any, 0, 2*n) // stands in for the informer's store
				for i := range n {
					svc, slice := apiObjects(i, tc.endpoints)
					s, _ := slimService(svc)
					store = append(store, s)
					x.SetService(s.(*record).value.(*index.Service))
					if slice != nil {
						sl, _ := slimEndpointSlice(slice)
						store = append(store, sl)
						x.SetEndpointSlice(sl.(*record).value.(*index.EndpointSlice))
					}
				}
				after := heapInUse()
				runtime.KeepAlive(store)
				runtime.KeepAlive(x)
				b.ReportMetric(float64(after-before)/n, "B/service")
			}
		})
	}
}

func heapInUse() uint64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

// apiObjects builds a Service (and for headless ones, its EndpointSlice)
// as the API sends them, managed fields and all.
func apiObjects(i, endpoints int) (*corev1.Service, *discoveryv1.EndpointSlice) {
	meta := metav1.ObjectMeta{Name: fmt.Sprintf("s%d", i), Namespace: "default", ResourceVersion: fmt.Sprint(1000 + i),
		UID: "6a1f2e0c-1c1e-4f0e-9a8e-0c6f1f2e3d4c", Labels: map[string]string{"app": fmt.Sprintf("s%d", i)},
		ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "kubectl", Operation: metav1.ManagedFieldsOperationApply}}}
	svc := &corev1.Service{ObjectMeta: meta, Spec: corev1.ServiceSpec{
		Type: corev1.ServiceTypeClusterIP, ClusterIP: fmt.Sprintf("10.96.%d.%d", i/250, i%250+1),
		Ports: []corev1.ServicePort{{Name: "http", Port: 80, Protocol: corev1.ProtocolTCP}}}}
	svc.Spec.ClusterIPs = []string{svc.Spec.ClusterIP}
	if endpoints == 0 {
		return svc, nil
	}
	svc.Spec.ClusterIP, svc.Spec.ClusterIPs = corev1.ClusterIPNone, []string{corev1.ClusterIPNone}
	sl := &discoveryv1.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Name: meta.Name + "-1", Namespace: "default",
		Labels: map[string]string{discoveryv1.LabelServiceName: meta.Name}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports:       []discoveryv1.EndpointPort{{Name: ptr.To("http"), Port: ptr.To[int32](8080), Protocol: ptr.To(corev1.ProtocolTCP)}}}
	for j := range endpoints {
		k := i*endpoints + j
		sl.Endpoints = append(sl.Endpoints, discoveryv1.Endpoint{
			Addresses:  []string{fmt.Sprintf("10.%d.%d.%d", 100+k>>16, (k>>8)&255, k&255)},
			Hostname:   ptr.To(fmt.Sprintf("pod-%d", j)),
			Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true), Serving: ptr.To(true), Terminating: ptr.To(false)},
			TargetRef:  &corev1.ObjectReference{Kind: "Pod", Namespace: "default", Name: fmt.Sprintf("%s-%d", meta.Name, j)},
			NodeName:   ptr.To("node-1"),
		})
	}
	return svc, sl
}
