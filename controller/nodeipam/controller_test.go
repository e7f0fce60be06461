package nodeipam

import (
	"context"
	"net/netip"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
)

func TestControllerAllocates(t *testing.T) {
	existing := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "given"},
		Spec: corev1.NodeSpec{PodCIDR: "10.244.0.0/24", PodCIDRs: []string{"10.244.0.0/24"}}}
	client := fake.NewClientset(existing, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "a"}})
	factory := informers.NewSharedInformerFactory(client, 0)
	c := New(client, factory, Options{ClusterCIDRs: []netip.Prefix{
		netip.MustParsePrefix("10.244.0.0/16"), netip.MustParsePrefix("fd00:10:244::/56")}})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	factory.Start(ctx.Done())
	done := make(chan struct{})
	go func() { c.Run(ctx, 1); close(done) }()
	defer func() { cancel(); <-done }()

	wait := func(name string, want []string) {
		t.Helper()
		var got []string
		for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
			n, err := client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
			if err == nil {
				got = n.Spec.PodCIDRs
				if slices.Equal(got, want) && n.Spec.PodCIDR == want[0] {
					return
				}
			}
		}
		t.Fatalf("node %s: got podCIDRs %v, want %v", name, got, want)
	}
	wait("a", []string{"10.244.1.0/24", "fd00:10:244::/64"})
	if _, err := client.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "b"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	wait("b", []string{"10.244.2.0/24", "fd00:10:244:1::/64"})
	wait("given", []string{"10.244.0.0/24"})
}
