package e2e

import (
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"portal.dev/portal/e2e/framework"
)

// TestNamespaceWithPodOfMissingNode pins issue 23: a namespace holding a
// Pod bound to a Node that does not exist stayed Terminating for good,
// with no condition saying why. The pod GC collects the Pod (after its
// 40 s quarantine of the Node), and while the namespace waits its
// conditions name the Pod as what remains.
func TestNamespaceWithPodOfMissingNode(t *testing.T) {
	s := framework.StartServer(t)
	client := s.Client()
	ctx := t.Context()
	s.MustKubectl("create", "namespace", "doomed")
	s.MustKubectlStdin(`apiVersion: v1
kind: Pod
metadata: {name: stranded, namespace: doomed}
spec:
  nodeName: no-such-node
  containers: [{name: app, image: app}]
`, "apply", "-f", "-")
	s.MustKubectl("delete", "namespace", "doomed", "--wait=false")

	eventuallyWithin(t, 30*time.Second, "the namespace to say what blocks it", func() (bool, string) {
		ns, err := client.CoreV1().Namespaces().Get(ctx, "doomed", metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		for _, c := range ns.Status.Conditions {
			if c.Type == corev1.NamespaceContentRemaining && c.Status == corev1.ConditionTrue &&
				strings.Contains(c.Message, "pods. has 1 resource instances") {
				return true, ""
			}
		}
		return false, fmt.Sprintf("phase %s, conditions %+v", ns.Status.Phase, ns.Status.Conditions)
	})
	out := s.MustKubectl("get", "namespace", "doomed", "-o", "jsonpath={.status.conditions[?(@.type==\"NamespaceContentRemaining\")].reason}")
	if out != "SomeResourcesRemain" {
		t.Errorf("kubectl shows NamespaceContentRemaining reason %q, want SomeResourcesRemain", out)
	}

	// Quarantine (40 s) + a check period (20 s) + the namespace's retry.
	eventuallyWithin(t, 2*time.Minute, "the namespace to be deleted", func() (bool, string) {
		ns, err := client.CoreV1().Namespaces().Get(ctx, "doomed", metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return true, ""
		}
		if err != nil {
			return false, err.Error()
		}
		return false, fmt.Sprintf("phase %s, conditions %+v", ns.Status.Phase, ns.Status.Conditions)
	})
	if _, err := client.CoreV1().Pods("doomed").Get(ctx, "stranded", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("pod stranded: got %v, want it collected", err)
	}
}
