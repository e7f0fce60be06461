package e2e

import (
	"context"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"portal.dev/portal/e2e/framework"
)

// TestPodLogErrors: `kubectl logs` reaches the pods/log subresource and gets
// the errors upstream gives before any agent is involved.
func TestPodLogErrors(t *testing.T) {
	s := framework.StartServer(t)
	c := s.Client()
	if _, err := c.CoreV1().Pods("default").Create(context.Background(), pod("unscheduled", ""), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"logs", "unscheduled"}, "does not have a host assigned"},
		{[]string{"logs", "unscheduled", "-c", "nope"}, "container nope is not valid for pod unscheduled"},
		{[]string{"logs", "unscheduled", "--tail", "-5", "--limit-bytes", "0"}, ""},
		{[]string{"logs", "missing"}, `pods "missing" not found`},
	} {
		out, err := s.Kubectl(tc.args...)
		if err == nil {
			t.Errorf("kubectl %s succeeded: %s", strings.Join(tc.args, " "), out)
			continue
		}
		if !strings.Contains(out, tc.want) {
			t.Errorf("kubectl %s: got %q, want it to say %q", strings.Join(tc.args, " "), out, tc.want)
		}
	}
	out, _ := s.Kubectl("get", "--raw", "/api/v1/namespaces/default/pods/unscheduled/log?tailLines=-1")
	if !strings.Contains(out, "tailLines") {
		t.Errorf("negative tailLines: got %q, want an error naming tailLines", out)
	}
}
