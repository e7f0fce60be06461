package e2e

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// clientAt is an admin client of the node a, reaching the API of node at
// on the LAN: one server's credentials at another server.
func (b *haBed) clientAt(a, at *haNode) kubernetes.Interface {
	b.t.Helper()
	cfg := a.Server.RESTConfig()
	cfg.Host = at.URL()
	cfg.Dial = a.NS.DialContext
	c, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		b.t.Fatal(err)
	}
	return c
}

// TestHAEtcdJoin: --cluster-init on one server and --join on two more make
// a cluster of three etcd members; every server serves what another wrote
// and accepts the others' client certificates; a fourth joins and then
// leaves with --leave, and the member list is right both times.
func TestHAEtcdJoin(t *testing.T) {
	b := newHABed(t, 3)
	b.Start()
	s1, s2, s3 := b.Nodes[0], b.Nodes[1], b.Nodes[2]
	for _, n := range b.Nodes {
		b.WaitMembers(n, "s1", "s2", "s3")
	}
	ctx := context.Background()
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "written-on-s2"}, Data: map[string]string{"k": "v"}}
	if _, err := b.clientAt(s1, s2).CoreV1().ConfigMaps("default").Create(ctx, cm, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create through s2 with s1's admin credentials: %v", err)
	}
	got, err := b.clientAt(s2, s3).CoreV1().ConfigMaps("default").Get(ctx, "written-on-s2", metav1.GetOptions{})
	if err != nil || got.Data["k"] != "v" {
		t.Fatalf("read through s3 with s2's admin credentials: %v, %v", got, err)
	}

	s4 := b.AddNode()
	b.Join(s4, "--leave")
	b.WaitMembers(s1, "s1", "s2", "s3", "s4")
	s4.Server.Stop()
	b.WaitMembers(s1, "s1", "s2", "s3")
	b.WaitMembers(s3, "s1", "s2", "s3")
}
