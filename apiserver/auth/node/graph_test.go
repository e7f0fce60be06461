package node

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func testPod(name, node string, mutate ...func(*corev1.PodSpec)) *corev1.Pod {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name},
		Spec: corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{Name: "c"}}}}
	for _, m := range mutate {
		m(&p.Spec)
	}
	return p
}

func withSecretVolume(name string) func(*corev1.PodSpec) {
	return func(s *corev1.PodSpec) {
		s.Volumes = append(s.Volumes, corev1.Volume{Name: "v-" + name,
			VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: name}}})
	}
}

func secret(name string) ref { return ref{kind: secretKind, namespace: "ns", name: name} }

// TestGraphReferences checks every way a pod can name an object the agent
// must read for it.
func TestGraphReferences(t *testing.T) {
	env := func(v corev1.EnvVarSource) func(*corev1.PodSpec) {
		return func(s *corev1.PodSpec) {
			s.Containers[0].Env = append(s.Containers[0].Env, corev1.EnvVar{Name: "E", ValueFrom: &v})
		}
	}
	sel := func(name string) corev1.LocalObjectReference { return corev1.LocalObjectReference{Name: name} }
	for _, tc := range []struct {
		name   string
		mutate func(*corev1.PodSpec)
		want   ref
	}{
		{"env secretKeyRef", env(corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{LocalObjectReference: sel("s")}}), secret("s")},
		{"env configMapKeyRef", env(corev1.EnvVarSource{ConfigMapKeyRef: &corev1.ConfigMapKeySelector{LocalObjectReference: sel("cm")}}),
			ref{configMapKind, "ns", "cm"}},
		{"envFrom secretRef", func(s *corev1.PodSpec) {
			s.Containers[0].EnvFrom = []corev1.EnvFromSource{{SecretRef: &corev1.SecretEnvSource{LocalObjectReference: sel("s")}}}
		}, secret("s")},
		{"envFrom configMapRef of an init container", func(s *corev1.PodSpec) {
			s.InitContainers = []corev1.Container{{Name: "i", EnvFrom: []corev1.EnvFromSource{{ConfigMapRef: &corev1.ConfigMapEnvSource{LocalObjectReference: sel("cm")}}}}}
		}, ref{configMapKind, "ns", "cm"}},
		{"secret volume", withSecretVolume("s"), secret("s")},
		{"configMap volume", func(s *corev1.PodSpec) {
			s.Volumes = []corev1.Volume{{Name: "v", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: sel("cm")}}}}
		}, ref{configMapKind, "ns", "cm"}},
		{"projected secret", func(s *corev1.PodSpec) {
			s.Volumes = []corev1.Volume{{Name: "v", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{
				Sources: []corev1.VolumeProjection{{Secret: &corev1.SecretProjection{LocalObjectReference: sel("s")}}}}}}}
		}, secret("s")},
		{"projected configMap", func(s *corev1.PodSpec) {
			s.Volumes = []corev1.Volume{{Name: "v", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{
				Sources: []corev1.VolumeProjection{{ConfigMap: &corev1.ConfigMapProjection{LocalObjectReference: sel("kube-root-ca.crt")}}}}}}}
		}, ref{configMapKind, "ns", "kube-root-ca.crt"}},
		{"CSI node publish secret", func(s *corev1.PodSpec) {
			s.Volumes = []corev1.Volume{{Name: "v", VolumeSource: corev1.VolumeSource{CSI: &corev1.CSIVolumeSource{Driver: "d", NodePublishSecretRef: &corev1.LocalObjectReference{Name: "s"}}}}}
		}, secret("s")},
		{"imagePullSecrets", func(s *corev1.PodSpec) { s.ImagePullSecrets = []corev1.LocalObjectReference{sel("s")} }, secret("s")},
		{"persistentVolumeClaim", func(s *corev1.PodSpec) {
			s.Volumes = []corev1.Volume{{Name: "v", VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "data"}}}}
		}, ref{pvcKind, "ns", "data"}},
		{"ephemeral volume's claim", func(s *corev1.PodSpec) {
			s.Volumes = []corev1.Volume{{Name: "scratch", VolumeSource: corev1.VolumeSource{Ephemeral: &corev1.EphemeralVolumeSource{}}}}
		}, ref{pvcKind, "ns", "p-scratch"}},
		{"service account", func(s *corev1.PodSpec) { s.ServiceAccountName = "robot" }, ref{serviceAccountKind, "ns", "robot"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var g graph
			g.setPod(testPod("p", "n1", tc.mutate))
			if !g.related("n1", tc.want) {
				t.Errorf("node n1 related to %+v: got false, want true", tc.want)
			}
			if g.related("n2", tc.want) {
				t.Errorf("node n2 related to %+v: got true, want false", tc.want)
			}
			other := tc.want
			other.namespace = "other"
			if g.related("n1", other) {
				t.Errorf("node n1 related to %+v in another namespace: got true, want false", other)
			}
		})
	}
}

// TestGraphPodLifecycle follows a pod through scheduling, a move to
// another node, a shared reference and deletion.
func TestGraphPodLifecycle(t *testing.T) {
	type want struct {
		node string
		ref  ref
		ok   bool
	}
	var g graph
	for _, step := range []struct {
		name  string
		apply func()
		want  []want
	}{
		{"unscheduled pod relates to no node", func() { g.setPod(testPod("a", "", withSecretVolume("s"))) },
			[]want{{"n1", secret("s"), false}}},
		{"pod bound to n1", func() { g.setPod(testPod("a", "n1", withSecretVolume("s"))) },
			[]want{{"n1", secret("s"), true}, {"n2", secret("s"), false}}},
		{"pod's spec now names another secret", func() { g.setPod(testPod("a", "n1", withSecretVolume("t"))) },
			[]want{{"n1", secret("s"), false}, {"n1", secret("t"), true}}},
		{"pod moved to n2", func() { g.setPod(testPod("a", "n2", withSecretVolume("t"))) },
			[]want{{"n1", secret("t"), false}, {"n2", secret("t"), true}}},
		{"second pod on n2 with the same secret", func() { g.setPod(testPod("b", "n2", withSecretVolume("t"))) },
			[]want{{"n2", secret("t"), true}}},
		{"first pod deleted, the second still holds it", func() { g.deletePod("ns", "a") },
			[]want{{"n2", secret("t"), true}}},
		{"second pod deleted", func() { g.deletePod("ns", "b") },
			[]want{{"n2", secret("t"), false}}},
		{"deleting an unknown pod changes nothing", func() { g.deletePod("ns", "zzz") }, nil},
	} {
		step.apply()
		for _, w := range step.want {
			if got := g.related(w.node, w.ref); got != w.ok {
				t.Errorf("%s: node %s related to %s: got %v, want %v", step.name, w.node, w.ref.name, got, w.ok)
			}
		}
	}
	if len(g.pods) != 0 || len(g.nodes) != 0 {
		t.Errorf("after every pod is gone: %d pods and %d objects left in the graph, want none", len(g.pods), len(g.nodes))
	}
}

func TestGraphPodOnNode(t *testing.T) {
	var g graph
	g.setPod(testPod("a", "n1"))
	if !g.podOnNode("n1", "ns", "a") {
		t.Error("pod a on n1: got false, want true")
	}
	if g.podOnNode("n2", "ns", "a") {
		t.Error("pod a on n2: got true, want false")
	}
}
