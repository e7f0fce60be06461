package explain

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/miekg/dns"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
)

// fakeAsker answers /dnsquery as a node's agent would, or fails with err.
type fakeAsker struct {
	err   error
	asked *[]string
}

func (f fakeAsker) DNSQuery(_ context.Context, node, name string, qtype uint16) (*dns.Msg, string, error) {
	*f.asked = append(*f.asked, node)
	if f.err != nil {
		return nil, "", f.err
	}
	m := new(dns.Msg)
	m.SetQuestion(name, qtype)
	return m, "10.96.0.10:53", nil
}

// TestClusterDNSThroughNode: the cluster DNS is asked through a Ready
// node's agent, so that explain run from outside the cluster network
// still gets the answer pods get (a regression: it asked only from the
// caller's host).
func TestClusterDNSThroughNode(t *testing.T) {
	tests := []struct {
		name       string
		objects    []runtime.Object
		agentErr   error
		wantServer string
		wantErr    string
		wantAsked  string
	}{
		{name: "asked through the first Ready node", objects: []runtime.Object{readyNode("node2"), readyNode("node1")},
			wantServer: "10.96.0.10:53 (from node node1)", wantAsked: "node1"},
		{name: "a node that is not Ready is not asked", objects: []runtime.Object{withAddress(readyNode("node1"), "10.0.0.1"), notReady("node0")},
			wantServer: "10.96.0.10:53 (from node node1)", wantAsked: "node1"},
		{name: "the agent failing: the direct question is tried, both reasons said, the agent asked once",
			objects: []runtime.Object{readyNode("node1")}, agentErr: errors.New("forbidden"),
			wantErr: "kube-system/kube-dns", wantAsked: "node1"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var asked []string
			c := &clusterDNS{client: fake.NewClientset(tc.objects...), nodes: fakeAsker{err: tc.agentErr, asked: &asked}}
			for range 2 {
				_, server, err := c.Query(context.Background(), "web.default.svc.cluster.local.", dns.TypeA)
				if tc.wantErr != "" {
					if err == nil || !strings.Contains(err.Error(), tc.wantErr) || !strings.Contains(err.Error(), "through node node1: forbidden") {
						t.Errorf("got error %v, want one naming %q and the agent's failure", err, tc.wantErr)
					}
				} else if err != nil || server != tc.wantServer {
					t.Errorf("got %q, %v; want %q", server, err, tc.wantServer)
				}
			}
			want := []string{tc.wantAsked, tc.wantAsked}
			if tc.agentErr != nil {
				want = want[:1]
			}
			if strings.Join(asked, ",") != strings.Join(want, ",") {
				t.Errorf("agents asked: got %v, want %v", asked, want)
			}
		})
	}
}

func notReady(name string) *corev1.Node {
	n := readyNode(name)
	n.Status.Conditions[0].Status = corev1.ConditionFalse
	return n
}
