package noderestriction

import (
	"context"
	"strings"
	"testing"

	authenticationv1 "k8s.io/api/authentication/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apiserver/pkg/admission"
	"k8s.io/apiserver/pkg/authentication/user"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
)

var (
	node1 = &user.DefaultInfo{Name: "system:node:n1", Groups: []string{user.NodesGroup}}
	admin = &user.DefaultInfo{Name: "admin", Groups: []string{user.SystemPrivilegedGroup}}
)

func pod(name, node string, uid string) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, UID: types.UID(uid)},
		Spec: corev1.PodSpec{NodeName: node}}
}

func nodeObj(name string, labels map[string]string, taints ...corev1.Taint) *corev1.Node {
	return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}, Spec: corev1.NodeSpec{Taints: taints}}
}

func lease(name string) *coordinationv1.Lease {
	return &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: "kube-node-lease", Name: name}}
}

func token(podName, uid string) *authenticationv1.TokenRequest {
	tr := &authenticationv1.TokenRequest{}
	if podName != "" {
		tr.Spec.BoundObjectRef = &authenticationv1.BoundObjectReference{APIVersion: "v1", Kind: "Pod", Name: podName, UID: types.UID(uid)}
	}
	return tr
}

type call struct {
	op                  admission.Operation
	resource            schema.GroupVersionResource
	sub, namespace, nam string
	obj, old            runtime.Object
}

var (
	pods   = corev1.SchemeGroupVersion.WithResource("pods")
	nodes  = corev1.SchemeGroupVersion.WithResource("nodes")
	leases = coordinationv1.SchemeGroupVersion.WithResource("leases")
	sas    = corev1.SchemeGroupVersion.WithResource("serviceaccounts")
)

func TestValidate(t *testing.T) {
	indexer := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
	indexer.Add(pod("mine", "n1", "u1"))
	indexer.Add(pod("theirs", "n2", "u2"))
	p := New()
	p.pods = corelisters.NewPodLister(indexer)

	zone := map[string]string{"topology.kubernetes.io/zone": "a", "kubernetes.io/hostname": "n1"}
	withLabel := func(k, v string) map[string]string {
		m := map[string]string{"kubernetes.io/hostname": "n1"}
		m[k] = v
		return m
	}
	taint := corev1.Taint{Key: "dedicated", Value: "db", Effect: corev1.TaintEffectNoSchedule}
	for _, tc := range []struct {
		name string
		user user.Info
		call call
		want string // "" allowed, else part of the 403's message
	}{
		{"own node registers", node1, call{admission.Create, nodes, "", "", "n1", nodeObj("n1", zone), nil}, ""},
		{"another node", node1, call{admission.Update, nodes, "", "", "n2", nodeObj("n2", nil), nodeObj("n2", nil)},
			`node "n1" is not allowed to modify node "n2"`},
		{"another node's status", node1, call{admission.Update, nodes, "status", "", "n2", nodeObj("n2", nil), nodeObj("n2", nil)},
			`node "n1" is not allowed to modify node "n2"`},
		{"registering another node", node1, call{admission.Create, nodes, "", "", "n2", nodeObj("n2", nil), nil},
			`is not allowed to modify node "n2"`},
		{"own node's status", node1, call{admission.Update, nodes, "status", "", "n1", nodeObj("n1", zone), nodeObj("n1", zone)}, ""},
		{"registering with a node-restriction label", node1,
			call{admission.Create, nodes, "", "", "n1", nodeObj("n1", withLabel("node-restriction.kubernetes.io/pci", "yes")), nil},
			"not allowed to set the following labels: node-restriction.kubernetes.io/pci"},
		{"adding a node-restriction label", node1,
			call{admission.Update, nodes, "", "", "n1", nodeObj("n1", withLabel("example.node-restriction.kubernetes.io/x", "1")), nodeObj("n1", zone)},
			"not allowed to modify labels: example.node-restriction.kubernetes.io/x"},
		{"removing a node-restriction label", node1,
			call{admission.Update, nodes, "", "", "n1", nodeObj("n1", zone), nodeObj("n1", withLabel("node-restriction.kubernetes.io/pci", "yes"))},
			`node "n1" is not allowed to modify labels: node-restriction.kubernetes.io/pci`},
		{"claiming to be a control-plane node", node1,
			call{admission.Update, nodes, "", "", "n1", nodeObj("n1", withLabel("node-role.kubernetes.io/control-plane", "")), nodeObj("n1", nil)},
			"not allowed to modify labels: node-role.kubernetes.io/control-plane"},
		{"kubelet's own labels and a user's", node1,
			call{admission.Update, nodes, "", "", "n1", nodeObj("n1", map[string]string{"node.kubernetes.io/exclude-from-external-load-balancers": "",
				"kubernetes.io/os": "linux", "team": "a"}), nodeObj("n1", nil)}, ""},
		{"removing a taint", node1, call{admission.Update, nodes, "", "", "n1", nodeObj("n1", nil), nodeObj("n1", nil, taint)},
			`node "n1" is not allowed to modify taints`},
		{"adding an owner", node1, call{admission.Update, nodes, "", "", "n1", owned(nodeObj("n1", nil), "ghost"), nodeObj("n1", nil)},
			`node "n1" is not allowed to modify ownerReferences`},
		{"adding an owner through status", node1, call{admission.Update, nodes, "status", "", "n1", owned(nodeObj("n1", nil), "ghost"), nodeObj("n1", nil)},
			`node "n1" is not allowed to modify ownerReferences`},
		{"removing an owner", node1, call{admission.Update, nodes, "", "", "n1", nodeObj("n1", nil), owned(nodeObj("n1", nil), "real")},
			`node "n1" is not allowed to modify ownerReferences`},
		{"owners kept", node1, call{admission.Update, nodes, "", "", "n1", owned(nodeObj("n1", zone), "real"), owned(nodeObj("n1", zone), "real")}, ""},
		{"registering with a config source", node1, call{admission.Create, nodes, "", "", "n1", configured(nodeObj("n1", nil), "a"), nil},
			`node "n1" is not allowed to create pods with a non-nil configSource`},
		{"changing the config source", node1, call{admission.Update, nodes, "", "", "n1", configured(nodeObj("n1", nil), "b"), configured(nodeObj("n1", nil), "a")},
			`node "n1" is not allowed to update configSource to a new non-nil configSource`},
		{"dropping the config source", node1, call{admission.Update, nodes, "", "", "n1", nodeObj("n1", nil), configured(nodeObj("n1", nil), "a")}, ""},

		{"own lease", node1, call{admission.Create, leases, "", "kube-node-lease", "", lease("n1"), nil}, ""},
		{"renewing own lease", node1, call{admission.Update, leases, "", "kube-node-lease", "n1", lease("n1"), lease("n1")}, ""},
		{"another node's lease", node1, call{admission.Create, leases, "", "kube-node-lease", "", lease("n2"), nil},
			"can only access node lease with the same name as the requesting node"},
		{"a lease elsewhere", node1, call{admission.Update, leases, "", "kube-system", "n1", lease("n1"), lease("n1")},
			`can only access leases in the "kube-node-lease" system namespace`},

		{"own pod's status", node1, call{admission.Update, pods, "status", "ns", "mine", pod("mine", "n1", "u1"), pod("mine", "n1", "u1")}, ""},
		{"another node's pod's status", node1, call{admission.Update, pods, "status", "ns", "theirs", pod("theirs", "n2", "u2"), pod("theirs", "n2", "u2")},
			`node "n1" can only update pod status for pods with spec.nodeName set to itself`},
		{"labels through pod status", node1, call{admission.Update, pods, "status", "ns", "mine",
			func() *corev1.Pod { p := pod("mine", "n1", "u1"); p.Labels = map[string]string{"app": "x"}; return p }(), pod("mine", "n1", "u1")},
			"cannot update labels through pod status"},
		{"deleting own pod", node1, call{admission.Delete, pods, "", "ns", "mine", nil, pod("mine", "n1", "u1")}, ""},
		{"deleting another node's pod", node1, call{admission.Delete, pods, "", "ns", "theirs", nil, pod("theirs", "n2", "u2")},
			"can only delete pods with spec.nodeName set to itself"},
		{"deleting another node's pod, looked up", node1, call{admission.Delete, pods, "", "ns", "theirs", nil, nil},
			"can only delete pods with spec.nodeName set to itself"},
		{"creating a pod", node1, call{admission.Create, pods, "", "ns", "x", pod("x", "n1", ""), nil}, "can not create pods"},

		{"token for own pod", node1, call{admission.Create, sas, "token", "ns", "default", token("mine", "u1"), nil}, ""},
		{"token for another node's pod", node1, call{admission.Create, sas, "token", "ns", "default", token("theirs", "u2"), nil},
			"node requested token bound to a pod scheduled on a different node"},
		{"token for no pod", node1, call{admission.Create, sas, "token", "ns", "default", token("", ""), nil},
			"node requested token not bound to a pod"},
		{"token for a recreated pod", node1, call{admission.Create, sas, "token", "ns", "default", token("mine", "old"), nil},
			"does not match the UID in record"},

		{"an administrator may do anything", admin, call{admission.Update, nodes, "", "", "n2", nodeObj("n2", nil), nodeObj("n2", nil, taint)}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := tc.call
			attrs := admission.NewAttributesRecord(c.obj, c.old, schema.GroupVersionKind{}, c.namespace, c.nam, c.resource, c.sub, c.op, nil, false, tc.user)
			err := p.Validate(context.Background(), attrs, nil)
			switch {
			case tc.want == "" && err != nil:
				t.Errorf("got %v, want allowed", err)
			case tc.want != "" && err == nil:
				t.Errorf("got allowed, want a 403 saying %q", tc.want)
			case tc.want != "" && !strings.Contains(err.Error(), tc.want):
				t.Errorf("got %q, want it to contain %q", err, tc.want)
			}
		})
	}
}

// owned is n with an owner reference to the ConfigMap named owner.
func owned(n *corev1.Node, owner string) *corev1.Node {
	n.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "ConfigMap", Name: owner, UID: types.UID(owner)}}
	return n
}

// configured is n with a config source naming the ConfigMap name.
func configured(n *corev1.Node, name string) *corev1.Node {
	n.Spec.ConfigSource = &corev1.NodeConfigSource{ConfigMap: &corev1.ConfigMapNodeConfigSource{
		Namespace: "kube-system", Name: name, KubeletConfigKey: "kubelet"}}
	return n
}
