package validation

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestValidateNamespace(t *testing.T) {
	now := metav1.Now()
	ns := func(name string, fins ...corev1.FinalizerName) *corev1.Namespace {
		return &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, ResourceVersion: "1"}, Spec: corev1.NamespaceSpec{Finalizers: fins}}
	}
	t.Run("create", func(t *testing.T) {
		cases := []struct {
			name string
			ns   *corev1.Namespace
			want []wantErr
		}{
			{name: "valid", ns: ns("team-a", "kubernetes")},
			{name: "name with dot", ns: ns("team.a"), want: []wantErr{e("metadata.name", tInvalid)}},
			{name: "prefixed finalizer", ns: ns("a", "example.com/cleanup")},
			{name: "unprefixed finalizer", ns: ns("a", "cleanup"),
				want: []wantErr{e("spec.finalizers", tInvalid, "name is neither a standard finalizer name nor is it fully qualified")}},
		}
		for _, tc := range cases {
			t.Run(tc.name, func(t *testing.T) { checkErrs(t, ValidateNamespace(tc.ns), tc.want...) })
		}
	})
	t.Run("status", func(t *testing.T) {
		cases := []struct {
			name     string
			phase    corev1.NamespacePhase
			deleting bool
			want     []wantErr
		}{
			{name: "active", phase: corev1.NamespaceActive},
			{name: "terminating while active", phase: corev1.NamespaceTerminating,
				want: []wantErr{e("status.Phase", tInvalid, "may only be 'Active' if `deletionTimestamp` is empty")}},
			{name: "terminating while deleting", phase: corev1.NamespaceTerminating, deleting: true},
			{name: "active while deleting", phase: corev1.NamespaceActive, deleting: true,
				want: []wantErr{e("status.Phase", tInvalid, "may only be 'Terminating'")}},
		}
		for _, tc := range cases {
			t.Run(tc.name, func(t *testing.T) {
				old := ns("a")
				if tc.deleting {
					old.DeletionTimestamp = &now
				}
				n := old.DeepCopy()
				n.Status.Phase = tc.phase
				checkErrs(t, ValidateNamespaceStatusUpdate(n, old), tc.want...)
			})
		}
	})
	t.Run("finalize", func(t *testing.T) {
		old := ns("a", "kubernetes")
		n := ns("a", "kubernetes", "bad")
		checkErrs(t, ValidateNamespaceFinalizeUpdate(n, old), e("spec.finalizers[1]", tInvalid))
	})
	t.Run("update", func(t *testing.T) {
		old := ns("a")
		n := ns("b")
		checkErrs(t, ValidateNamespaceUpdate(n, old), e("metadata.name", tInvalid, "field is immutable"))
	})
}

func TestValidateConfigMap(t *testing.T) {
	cm := func() *corev1.ConfigMap {
		return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "cfg", Namespace: "ns", ResourceVersion: "1"}, Data: map[string]string{"app.yaml": "x"}}
	}
	cases := []struct {
		name string
		edit func(*corev1.ConfigMap)
		want []wantErr
	}{
		{name: "valid"},
		{name: "bad key", edit: func(c *corev1.ConfigMap) { c.Data["a/b"] = "" },
			want: []wantErr{e("data[a/b]", tInvalid, "a valid config key must consist of alphanumeric characters")}},
		{name: "dot-dot key", edit: func(c *corev1.ConfigMap) { c.BinaryData = map[string][]byte{"..": nil} },
			want: []wantErr{e("binaryData[..]", tInvalid, "must not be '..'")}},
		{name: "key in both", edit: func(c *corev1.ConfigMap) { c.BinaryData = map[string][]byte{"app.yaml": nil} },
			want: []wantErr{e("data[app.yaml]", tInvalid, "duplicate of key present in binaryData")}},
		{name: "exactly 1 MiB", edit: func(c *corev1.ConfigMap) { c.Data["app.yaml"] = strings.Repeat("x", corev1.MaxSecretSize) }},
		{name: "over 1 MiB", edit: func(c *corev1.ConfigMap) { c.Data["app.yaml"] = strings.Repeat("x", corev1.MaxSecretSize+1) },
			// Upstream reports the whole object with an empty path, printed "[]".
			want: []wantErr{e("[]", "FieldValueTooLong", "may not be more than 1048576 bytes")}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := cm()
			if tc.edit != nil {
				tc.edit(c)
			}
			checkErrs(t, ValidateConfigMap(c), tc.want...)
		})
	}
	t.Run("immutable", func(t *testing.T) {
		old := cm()
		old.Immutable = ptr(true)
		n := old.DeepCopy()
		n.Data["app.yaml"] = "y"
		n.Immutable = ptr(false)
		checkErrs(t, ValidateConfigMapUpdate(n, old),
			e("immutable", tForbidden, "field is immutable when `immutable` is set"),
			e("data", tForbidden, "field is immutable when `immutable` is set"))
	})
}

func TestValidateSecret(t *testing.T) {
	secret := func(typ corev1.SecretType, data map[string][]byte) *corev1.Secret {
		return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "s", Namespace: "ns", ResourceVersion: "1"}, Type: typ, Data: data}
	}
	cases := []struct {
		name string
		s    *corev1.Secret
		want []wantErr
	}{
		{name: "opaque", s: secret(corev1.SecretTypeOpaque, map[string][]byte{"password": []byte("x")})},
		{name: "bad key", s: secret(corev1.SecretTypeOpaque, map[string][]byte{"pass word": nil}),
			want: []wantErr{e("data[pass word]", tInvalid)}},
		{name: "too big", s: secret(corev1.SecretTypeOpaque, map[string][]byte{"a": make([]byte, corev1.MaxSecretSize+1)}),
			want: []wantErr{e("data", "FieldValueTooLong")}},
		{name: "tls", s: secret(corev1.SecretTypeTLS, map[string][]byte{"tls.crt": nil, "tls.key": nil})},
		{name: "tls without key", s: secret(corev1.SecretTypeTLS, map[string][]byte{"tls.crt": nil}),
			want: []wantErr{e("data[tls.key]", tRequired)}},
		{name: "dockerconfigjson invalid", s: secret(corev1.SecretTypeDockerConfigJson, map[string][]byte{".dockerconfigjson": []byte("{")}),
			want: []wantErr{e("data[.dockerconfigjson]", tInvalid)}},
		{name: "basic-auth empty", s: secret(corev1.SecretTypeBasicAuth, nil),
			want: []wantErr{e("data[username]", tRequired), e("data[password]", tRequired)}},
		{name: "ssh-auth empty key", s: secret(corev1.SecretTypeSSHAuth, map[string][]byte{"ssh-privatekey": nil}),
			want: []wantErr{e("data[ssh-privatekey]", tRequired)}},
		{name: "service account token needs annotation", s: secret(corev1.SecretTypeServiceAccountToken, nil),
			want: []wantErr{e("metadata.annotations[kubernetes.io/service-account.name]", tRequired)}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) { checkErrs(t, ValidateSecret(tc.s), tc.want...) })
	}
	t.Run("type immutable", func(t *testing.T) {
		old := secret(corev1.SecretTypeOpaque, nil)
		n := secret("example.com/custom", nil)
		checkErrs(t, ValidateSecretUpdate(n, old), e("type", tInvalid, "field is immutable"))
	})
}

func TestValidateServiceAccount(t *testing.T) {
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "builder", Namespace: "ns", ResourceVersion: "1"}}
	checkErrs(t, ValidateServiceAccount(sa))
	bad := sa.DeepCopy()
	bad.Name = "Builder"
	checkErrs(t, ValidateServiceAccount(bad), e("metadata.name", tInvalid))
	checkErrs(t, ValidateServiceAccountUpdate(bad, sa), e("metadata.name", tInvalid, "field is immutable"), e("metadata.name", tInvalid, "RFC 1123"))
}

func TestValidateNode(t *testing.T) {
	node := func() *corev1.Node {
		return &corev1.Node{
			ObjectMeta: metav1.ObjectMeta{Name: "node-1", ResourceVersion: "1"},
			Spec:       corev1.NodeSpec{PodCIDR: "10.244.1.0/24", PodCIDRs: []string{"10.244.1.0/24"}},
			Status:     corev1.NodeStatus{Capacity: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("4")}},
		}
	}
	cases := []struct {
		name string
		edit func(*corev1.Node)
		want []wantErr
	}{
		{name: "valid"},
		{name: "dual-stack podCIDRs", edit: func(n *corev1.Node) { n.Spec.PodCIDRs = []string{"10.244.1.0/24", "fd00:1::/64"} }},
		{name: "podCIDR invalid", edit: func(n *corev1.Node) { n.Spec.PodCIDRs = []string{"10.244.1.0"} },
			want: []wantErr{e("spec.podCIDRs[0]", tInvalid, "must be a valid CIDR value")}},
		{name: "legacy podCIDR only", edit: func(n *corev1.Node) { n.Spec.PodCIDRs = nil; n.Spec.PodCIDR = "10.244.1.1/24" },
			want: []wantErr{e("spec.podCIDRs[0]", tInvalid, "must not have bits set beyond the prefix length")}},
		{name: "two IPv4 podCIDRs", edit: func(n *corev1.Node) { n.Spec.PodCIDRs = []string{"10.244.1.0/24", "10.244.2.0/24"} },
			want: []wantErr{e("spec.podCIDRs", tInvalid, "may specify no more than one CIDR for each IP family")}},
		{name: "namespace forbidden", edit: func(n *corev1.Node) { n.Namespace = "default" },
			want: []wantErr{e("metadata.namespace", tForbidden)}},
		{name: "taint effect unknown", edit: func(n *corev1.Node) { n.Spec.Taints = []corev1.Taint{{Key: "k", Effect: "Sometimes"}} },
			want: []wantErr{e("metadata.taints[0].effect", tNotSupported)}},
		{name: "duplicate taint", edit: func(n *corev1.Node) {
			n.Spec.Taints = []corev1.Taint{{Key: "k", Effect: corev1.TaintEffectNoSchedule}, {Key: "k", Value: "v", Effect: corev1.TaintEffectNoSchedule}}
		}, want: []wantErr{e("metadata.taints[1]", tDuplicate, "taints must be unique by key and effect pair")}},
		{name: "negative capacity", edit: func(n *corev1.Node) { n.Status.Capacity[corev1.ResourceCPU] = resource.MustParse("-1") },
			want: []wantErr{e("status.capacity.cpu", tInvalid, "must be greater than or equal to 0")}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			n := node()
			if tc.edit != nil {
				tc.edit(n)
			}
			checkErrs(t, ValidateNode(n), tc.want...)
		})
	}
	updates := []struct {
		name string
		old  func(*corev1.Node)
		edit func(*corev1.Node)
		want []wantErr
	}{
		{name: "podCIDR set once", old: func(n *corev1.Node) { n.Spec.PodCIDR, n.Spec.PodCIDRs = "", nil }},
		{name: "podCIDR changed", edit: func(n *corev1.Node) { n.Spec.PodCIDR, n.Spec.PodCIDRs = "10.244.2.0/24", []string{"10.244.2.0/24"} },
			want: []wantErr{e("spec.podCIDRs", tForbidden, `node updates may not change podCIDR except from "" to valid`)}},
		{name: "providerID changed", old: func(n *corev1.Node) { n.Spec.ProviderID = "aws://a" }, edit: func(n *corev1.Node) { n.Spec.ProviderID = "aws://b" },
			want: []wantErr{e("spec.providerID", tForbidden)}},
		{name: "duplicate address", edit: func(n *corev1.Node) {
			a := corev1.NodeAddress{Type: corev1.NodeInternalIP, Address: "192.0.2.1"}
			n.Status.Addresses = []corev1.NodeAddress{a, a}
		}, want: []wantErr{e("status.addresses[1]", tDuplicate)}},
	}
	for _, tc := range updates {
		t.Run("update "+tc.name, func(t *testing.T) {
			old := node()
			if tc.old != nil {
				tc.old(old)
			}
			n := node()
			if tc.edit != nil {
				tc.edit(n)
			}
			checkErrs(t, ValidateNodeUpdate(n, old), tc.want...)
		})
	}
}

func TestValidateEvent(t *testing.T) {
	now := metav1.NowMicro()
	cases := []struct {
		name string
		ev   corev1.Event
		want []wantErr
	}{
		{name: "legacy event in object's namespace", ev: corev1.Event{
			ObjectMeta:     metav1.ObjectMeta{Name: "web.1", Namespace: "ns"},
			InvolvedObject: corev1.ObjectReference{Kind: "Pod", Namespace: "ns", Name: "web"},
		}},
		{name: "legacy event in other namespace", ev: corev1.Event{
			ObjectMeta:     metav1.ObjectMeta{Name: "web.1", Namespace: "other"},
			InvolvedObject: corev1.ObjectReference{Kind: "Pod", Namespace: "ns", Name: "web"},
		}, want: []wantErr{e("involvedObject.namespace", tInvalid, "does not match event.namespace")}},
		{name: "legacy cluster-object event in default", ev: corev1.Event{
			ObjectMeta:     metav1.ObjectMeta{Name: "node.1", Namespace: "default"},
			InvolvedObject: corev1.ObjectReference{Kind: "Node", Name: "node-1"},
		}},
		{name: "new-style event needs reporting fields", ev: corev1.Event{
			ObjectMeta:     metav1.ObjectMeta{Name: "web.1", Namespace: "ns"},
			InvolvedObject: corev1.ObjectReference{Kind: "Pod", Namespace: "ns", Name: "web"},
			EventTime:      now,
		}, want: []wantErr{
			// As upstream: the empty name is also run through the qualified-name check.
			e("reportingController", tRequired),
			e("reportingController", tInvalid, "name part must be non-empty"),
			e("reportingController", tInvalid, "name part must consist of"),
			e("reportingInstance", tRequired),
			e("action", tRequired), e("reason", tRequired),
		}},
		{name: "new-style event complete", ev: corev1.Event{
			ObjectMeta:          metav1.ObjectMeta{Name: "web.1", Namespace: "ns"},
			InvolvedObject:      corev1.ObjectReference{Kind: "Pod", Namespace: "ns", Name: "web"},
			EventTime:           now,
			ReportingController: "example.com/controller",
			ReportingInstance:   "controller-0",
			Action:              "Sync",
			Reason:              "Synced",
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) { checkErrs(t, ValidateEvent(&tc.ev), tc.want...) })
	}
}
