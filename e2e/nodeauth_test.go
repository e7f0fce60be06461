package e2e

import (
	"os/exec"
	"strings"
	"testing"

	"portal.dev/portal/e2e/framework"
)

const nodeAuthObjects = `
apiVersion: v1
kind: Node
metadata: {name: node1}
---
apiVersion: v1
kind: Node
metadata: {name: node2}
---
apiVersion: v1
kind: Secret
metadata: {name: own}
stringData: {password: mine}
---
apiVersion: v1
kind: Secret
metadata: {name: pull}
stringData: {password: registry}
---
apiVersion: v1
kind: Secret
metadata: {name: other}
stringData: {password: theirs}
---
apiVersion: v1
kind: ConfigMap
metadata: {name: settings}
data: {mode: fast}
---
apiVersion: v1
kind: Pod
metadata: {name: mine}
spec:
  nodeName: node1
  imagePullSecrets: [{name: pull}]
  containers:
  - name: c
    image: debian
    env:
    - name: PASSWORD
      valueFrom: {secretKeyRef: {name: own, key: password}}
    envFrom:
    - configMapRef: {name: settings}
---
apiVersion: v1
kind: Pod
metadata: {name: theirs}
spec:
  nodeName: node2
  containers:
  - name: c
    image: debian
  volumes:
  - name: s
    secret: {secretName: other}
`

// TestNodeAuthorization: under --authorization-mode Node,RBAC, the
// credential `portal kubeconfig` mints for node1's agent reads the Secrets
// and ConfigMaps of pods bound to node1 and of no other pod, loses them
// when its pod goes, and may modify its own Node but not another, as
// upstream's Node authorizer and NodeRestriction admission answer.
func TestNodeAuthorization(t *testing.T) {
	s := framework.StartServer(t, "--authorization-mode", "Node,RBAC")
	s.MustKubectlStdin(nodeAuthObjects, "apply", "-f", "-")
	node1 := s.UserKubeconfig(t, "system:node:node1", s.URL())
	as := func(kc string, args ...string) (string, error) {
		return s.Kubectl(append([]string{"--kubeconfig", kc}, args...)...)
	}
	forbidden := func(t *testing.T, want string, args ...string) {
		t.Helper()
		out, err := as(node1, args...)
		if err == nil || !strings.Contains(out, want) {
			t.Errorf("kubectl %s as node1: got %v\n%s\nwant a 403 saying %q", strings.Join(args, " "), err, out, want)
		}
	}

	t.Run("reads its own pod's secrets and configmaps", func(t *testing.T) {
		// The authorizer learns pods from its informer, a moment after
		// the create.
		waitUntil(t, "node1 to read its pod's Secret", func() bool {
			out, err := as(node1, "get", "secret", "own", "-o", "jsonpath={.data.password}")
			return err == nil && out == "bWluZQ=="
		})
		for _, obj := range []string{"secret/pull", "configmap/settings"} {
			if out, err := as(node1, "get", obj); err != nil {
				t.Errorf("node1 reading %s of its pod: %v\n%s", obj, err, out)
			}
		}
	})

	t.Run("cannot read another node's pod's secret", func(t *testing.T) {
		forbidden(t, `Error from server (Forbidden): secrets "other" is forbidden: User "system:node:node1" cannot get resource "secrets" in API group "" in the namespace "default": `,
			"get", "secret", "other")
		forbidden(t, `no relationship found between node 'node1' and this object`, "get", "secret", "other")
		forbidden(t, `User "system:node:node1" cannot list resource "secrets"`, "get", "secrets")
	})

	t.Run("reads only its own pods", func(t *testing.T) {
		if out, err := as(node1, "get", "pods", "-A", "--field-selector", "spec.nodeName=node1", "-o", "name"); err != nil || strings.TrimSpace(out) != "pod/mine" {
			t.Errorf("node1 listing its pods: got %v %q, want pod/mine", err, out)
		}
		forbidden(t, "can only list/watch pods with spec.nodeName field selector", "get", "pods", "-A")
		forbidden(t, `pods "theirs" is forbidden`, "get", "pod", "theirs")
	})

	t.Run("modifies its own node only", func(t *testing.T) { nodeModifiesOwnNode(t, s, node1, as, forbidden) })

	t.Run("only its own lease", func(t *testing.T) {
		lease := "apiVersion: coordination.k8s.io/v1\nkind: Lease\nmetadata: {name: %s, namespace: kube-node-lease}\nspec: {holderIdentity: x}\n"
		if out, err := s.KubectlStdin(strings.ReplaceAll(lease, "%s", "node1"), "--kubeconfig", node1, "create", "-f", "-"); err != nil {
			t.Errorf("node1 creating its lease: %v\n%s", err, out)
		}
		out, err := s.KubectlStdin(strings.ReplaceAll(lease, "%s", "node2"), "--kubeconfig", node1, "create", "-f", "-")
		if want := "can only access node lease with the same name as the requesting node"; err == nil || !strings.Contains(out, want) {
			t.Errorf("node1 creating node2's lease: got %v\n%s\nwant a 403 saying %q", err, out, want)
		}
	})

	t.Run("cannot delete a namespace", func(t *testing.T) {
		forbidden(t, `namespaces "default" is forbidden: User "system:node:node1" cannot delete resource "namespaces"`, "delete", "namespace", "default")
	})

	t.Run("a node name without system:nodes is no node", func(t *testing.T) { nodeImpostor(t, s, as) })

	t.Run("loses a pod's secret when the pod goes", func(t *testing.T) {
		s.MustKubectl("delete", "pod", "mine", "--grace-period", "0", "--force")
		waitUntil(t, "node1 to lose its deleted pod's Secret", func() bool {
			out, err := as(node1, "get", "secret", "own")
			return err != nil && strings.Contains(out, "no relationship found between node 'node1'")
		})
	})
}

// nodeModifiesOwnNode: node1 may update its own Node, but not another's,
// not its restricted labels or taints, and may neither patch nor delete.
func nodeModifiesOwnNode(t *testing.T, s *framework.Server, node1 string, as func(string, ...string) (string, error),
	forbidden func(*testing.T, string, ...string)) {
	// The agent writes its Node with update, not patch, and that is
	// all its role grants: edit locally, then replace.
	replace := func(args ...string) (string, error) {
		edited, err := as(node1, append(args, "--dry-run=client", "-o", "yaml")...)
		if err != nil {
			return edited, err
		}
		return s.KubectlStdin(edited, "--kubeconfig", node1, "replace", "-f", "-")
	}
	if out, err := replace("label", "node", "node1", "team=a"); err != nil {
		t.Errorf("node1 labelling itself: %v\n%s", err, out)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"label", "node", "node2", "team=a"}, `nodes "node2" is forbidden: node "node1" is not allowed to modify node "node2"`},
		{[]string{"label", "node", "node1", "node-restriction.kubernetes.io/pci=yes"},
			`nodes "node1" is forbidden: node "node1" is not allowed to modify labels: node-restriction.kubernetes.io/pci`},
		{[]string{"taint", "node", "node1", "dedicated=db:NoSchedule"}, `node "node1" is not allowed to modify taints`},
	} {
		if out, err := replace(tc.args...); err == nil || !strings.Contains(out, tc.want) {
			t.Errorf("kubectl %s as node1: got %v\n%s\nwant a 403 saying %q", strings.Join(tc.args, " "), err, out, tc.want)
		}
	}
	forbidden(t, `User "system:node:node1" cannot patch resource "nodes"`, "label", "node", "node1", "team=b", "--overwrite")
	forbidden(t, `User "system:node:node1" cannot delete resource "nodes"`, "delete", "node", "node2")
}

// nodeImpostor: a node's user name outside the system:nodes group is no
// node to the Node authorizer.
func nodeImpostor(t *testing.T, s *framework.Server, as func(string, ...string) (string, error)) {
	kc := t.TempDir() + "/impostor.kubeconfig"
	if out, err := exec.Command(framework.Binary(t), "kubeconfig", "--data-dir", s.DataDir, "--user", "system:node:node1",
		"--group", "ops", "--server", s.URL(), "-o", kc).CombinedOutput(); err != nil {
		t.Fatalf("kubeconfig: %v\n%s", err, out)
	}
	if out, err := as(kc, "get", "secret", "own"); err == nil || !strings.Contains(out, "Forbidden") {
		t.Errorf("system:node:node1 in group ops reading node1's pod's secret: got %v\n%s\nwant 403", err, out)
	}
}
