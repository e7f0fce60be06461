package node

import (
	"context"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/cache"
)

var (
	node1 = &user.DefaultInfo{Name: "system:node:n1", Groups: []string{user.NodesGroup, user.AllAuthenticated}}
	// notNode has a node's name but not the group, as a credential minted
	// for a person by that name would.
	notNode = &user.DefaultInfo{Name: "system:node:n1", Groups: []string{user.AllAuthenticated}}
)

func req(u user.Info, verb, group, resource, sub, ns, name string) authorizer.AttributesRecord {
	return authorizer.AttributesRecord{User: u, Verb: verb, APIGroup: group, APIVersion: "v1", Resource: resource,
		Subresource: sub, Namespace: ns, Name: name, ResourceRequest: true}
}

func withNodeSelector(a authorizer.AttributesRecord, node string) authorizer.AttributesRecord {
	a.FieldSelectorRequirements = fields.Requirements{{Field: "spec.nodeName", Operator: selection.Equals, Value: node}}
	return a
}

func TestAuthorize(t *testing.T) {
	a := &Authorizer{rules: Rules()}
	a.graph.setPod(testPod("mine", "n1", withSecretVolume("own"), func(s *corev1.PodSpec) {
		s.ServiceAccountName = "robot"
		s.Volumes = append(s.Volumes, corev1.Volume{Name: "cm", VolumeSource: corev1.VolumeSource{
			ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: "settings"}}}})
	}))
	a.graph.setPod(testPod("theirs", "n2", withSecretVolume("other")))
	allow, none := authorizer.DecisionAllow, authorizer.DecisionNoOpinion
	for _, tc := range []struct {
		name   string
		attrs  authorizer.AttributesRecord
		want   authorizer.Decision
		reason string
	}{
		{"own pod's secret", req(node1, "get", "", "secrets", "", "ns", "own"), allow, ""},
		{"own pod's secret watched by name", req(node1, "watch", "", "secrets", "", "ns", "own"), allow, ""},
		{"another node's pod's secret", req(node1, "get", "", "secrets", "", "ns", "other"), none, "no relationship found between node 'n1' and this object"},
		{"a secret no pod uses", req(node1, "get", "", "secrets", "", "ns", "nobody"), none, "no relationship"},
		{"every secret", req(node1, "list", "", "secrets", "", "ns", ""), none, "No Object name found"},
		{"secrets of every namespace", req(node1, "list", "", "secrets", "", "", ""), none, "namespaced"},
		{"writing own pod's secret", req(node1, "update", "", "secrets", "", "ns", "own"), none, "can only read"},
		{"own pod's configmap", req(node1, "get", "", "configmaps", "", "ns", "settings"), allow, ""},
		{"token for own pod's service account", req(node1, "create", "", "serviceaccounts", "token", "ns", "robot"), allow, ""},
		{"token for another service account", req(node1, "create", "", "serviceaccounts", "token", "ns", "default"), none, "no relationship"},
		{"reading a service account", req(node1, "get", "", "serviceaccounts", "", "ns", "robot"), none, "can only create token"},
		{"own lease", req(node1, "update", "coordination.k8s.io", "leases", "", "kube-node-lease", "n1"), allow, ""},
		{"creating a lease", req(node1, "create", "coordination.k8s.io", "leases", "", "kube-node-lease", ""), allow, ""},
		{"another node's lease", req(node1, "update", "coordination.k8s.io", "leases", "", "kube-node-lease", "n2"), none, "same name"},
		{"a lease elsewhere", req(node1, "get", "coordination.k8s.io", "leases", "", "kube-system", "n1"), none, "kube-node-lease"},
		{"deleting own lease", req(node1, "delete", "coordination.k8s.io", "leases", "", "kube-node-lease", "n1"), none, ""},
		{"own pods watched by node", withNodeSelector(req(node1, "watch", "", "pods", "", "", ""), "n1"), allow, ""},
		{"another node's pods", withNodeSelector(req(node1, "list", "", "pods", "", "", ""), "n2"), none, "spec.nodeName field selector"},
		{"every pod", req(node1, "list", "", "pods", "", "", ""), none, "spec.nodeName field selector"},
		{"own pod by name", req(node1, "get", "", "pods", "", "ns", "mine"), allow, ""},
		{"another node's pod by name", req(node1, "get", "", "pods", "", "ns", "theirs"), none, "no relationship"},
		{"pod status", req(node1, "update", "", "pods", "status", "ns", "mine"), allow, ""},
		{"deleting a pod", req(node1, "delete", "", "pods", "", "ns", "mine"), allow, ""},
		{"creating a pod", req(node1, "create", "", "pods", "", "ns", ""), none, ""},
		{"registering a node", req(node1, "create", "", "nodes", "", "", ""), allow, ""},
		{"watching nodes", req(node1, "watch", "", "nodes", "", "", ""), allow, ""},
		{"node status", req(node1, "update", "", "nodes", "status", "", "n1"), allow, ""},
		{"deleting a node", req(node1, "delete", "", "nodes", "", "", "n2"), none, ""},
		{"services", req(node1, "list", "", "services", "", "", ""), allow, ""},
		{"creating a service", req(node1, "create", "", "services", "", "ns", ""), none, ""},
		{"events", req(node1, "create", "", "events", "", "ns", ""), allow, ""},
		{"deleting a namespace", req(node1, "delete", "", "namespaces", "", "", "ns"), none, ""},
		{"node name without the group", req(notNode, "get", "", "secrets", "", "ns", "own"), none, ""},
		{"node name without the group, nodes", req(notNode, "list", "", "nodes", "", "", ""), none, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, reason, err := a.Authorize(context.Background(), tc.attrs)
			if err != nil {
				t.Fatalf("error: %v", err)
			}
			if got != tc.want {
				t.Errorf("decision: got %v (%q), want %v", got, reason, tc.want)
			}
			if tc.reason != "" && !strings.Contains(reason, tc.reason) {
				t.Errorf("reason: got %q, want it to contain %q", reason, tc.reason)
			}
		})
	}
}

// TestNewAuthorizerFromInformer checks the authorizer learns pods from
// the informer factory it is given.
func TestNewAuthorizerFromInformer(t *testing.T) {
	client := fake.NewClientset(testPod("mine", "n1", withSecretVolume("own")))
	f := informers.NewSharedInformerFactory(client, 0)
	a, err := NewAuthorizer(f)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	f.Start(ctx.Done())
	defer func() {
		// Shutdown waits for the informers, which stop with ctx.
		cancel()
		f.Shutdown()
	}()
	if !cache.WaitForCacheSync(ctx.Done(), a.HasSynced) {
		t.Fatal("informer did not sync")
	}
	got, reason, _ := a.Authorize(ctx, req(node1, "get", "", "secrets", "", "ns", "own"))
	if got != authorizer.DecisionAllow {
		t.Errorf("own pod's secret: got %v (%q), want allow", got, reason)
	}
}
