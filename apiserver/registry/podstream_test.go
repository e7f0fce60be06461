package registry

import (
	"context"
	"path"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	genericrequest "k8s.io/apiserver/pkg/endpoints/request"
)

func TestStreamLocation(t *testing.T) {
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "demo", Name: "web"},
		Spec: corev1.PodSpec{NodeName: "n1", Containers: []corev1.Container{{Name: "main"}}}}
	two := pod.DeepCopy()
	two.Spec.Containers = append(two.Spec.Containers, corev1.Container{Name: "side"})
	cases := []struct {
		name    string
		pod     *corev1.Pod
		opts    runtime.Object
		want    string
		wantErr string
	}{
		{name: "exec of the only container", pod: pod,
			opts: &corev1.PodExecOptions{Command: []string{"sh", "-c", "echo hi"}, Stdin: true, Stdout: true, Stderr: true},
			want: "https://10.0.0.1:10250/exec/demo/web/main?command=sh&command=-c&command=echo+hi&error=1&input=1&output=1"},
		{name: "exec with a tty", pod: pod, opts: &corev1.PodExecOptions{Command: []string{"sh"}, Stdin: true, Stdout: true, TTY: true},
			want: "https://10.0.0.1:10250/exec/demo/web/main?command=sh&input=1&output=1&tty=1"},
		{name: "attach to a named container", pod: two, opts: &corev1.PodAttachOptions{Container: "side", Stdout: true},
			want: "https://10.0.0.1:10250/attach/demo/web/side?output=1"},
		{name: "port-forward", pod: pod, opts: &corev1.PodPortForwardOptions{Ports: []int32{80, 8080}},
			want: "https://10.0.0.1:10250/portForward/demo/web?port=80&port=8080"},
		{name: "exec without a command", pod: pod, opts: &corev1.PodExecOptions{Stdout: true},
			wantErr: "you must specify at least 1 command"},
		{name: "exec without a stream", pod: pod, opts: &corev1.PodExecOptions{Command: []string{"true"}},
			wantErr: "you must specify at least 1 of stdin, stdout, stderr"},
		{name: "a container the pod lacks", pod: pod, opts: &corev1.PodExecOptions{Container: "nosuch", Command: []string{"true"}, Stdout: true},
			wantErr: "container nosuch is not valid for pod web"},
		{name: "two containers, none named", pod: two, opts: &corev1.PodAttachOptions{Stdout: true},
			wantErr: "a container name must be specified for pod web, choose one of: [main side]"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			loc, _, err := streamLocation(tc.pod, "10.0.0.1:10250", tc.opts)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("got %v, want an error with %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := loc.String(); got != tc.want {
				t.Errorf("got %s, want %s", got, tc.want)
			}
		})
	}
}

// grantOnly allows exactly the listed verbs on every resource.
func grantOnly(verbs ...string) authorizer.Authorizer {
	return authorizer.AuthorizerFunc(func(_ context.Context, a authorizer.Attributes) (authorizer.Decision, string, error) {
		if slices.Contains(verbs, a.GetVerb()) {
			return authorizer.DecisionAllow, "", nil
		}
		return authorizer.DecisionNoOpinion, "", nil
	})
}

// TestStreamCreateCheck pins the WebSocket hole: a GET to pods/exec,
// attach or portforward (kubectl's WebSocket) needs create on the
// subresource too, as upstream since 1.35; a POST was authorized as
// create already.
func TestStreamCreateCheck(t *testing.T) {
	for _, tc := range []struct {
		name    string
		reqVerb string
		granted authorizer.Authorizer
		wantErr string
	}{
		{"GET with get only", "get", grantOnly("get"), `pods "web" is forbidden: User "dave" cannot create resource "pods/exec" in API group "" in the namespace "a"`},
		{"GET with get and create", "get", grantOnly("get", "create"), ""},
		{"POST (create, already authorized)", "create", grantOnly(), ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := genericrequest.WithNamespace(context.Background(), "a")
			ctx = genericrequest.WithUser(ctx, &user.DefaultInfo{Name: "dave"})
			ctx = genericrequest.WithRequestInfo(ctx, &genericrequest.RequestInfo{IsResourceRequest: true, Verb: tc.reqVerb,
				Namespace: "a", Resource: "pods", Subresource: "exec", Name: "web", APIVersion: "v1"})
			r := &StreamREST{verb: verbExec, authz: tc.granted}
			err := r.authorizeCreate(ctx, "web")
			got := ""
			if err != nil {
				got = err.Error()
				if !apierrors.IsForbidden(err) {
					t.Errorf("got %v, want a 403", err)
				}
			}
			if got != tc.wantErr {
				t.Errorf("got %q, want %q", got, tc.wantErr)
			}
		})
	}
}

// TestNodeProxyRefusesSessions: nodes/proxy reaches the agent's
// diagnostics but not its pod sessions, which would bypass pods/exec's
// authorization; dot segments and case do not get around it.
func TestNodeProxyRefusesSessions(t *testing.T) {
	r := NewNodeProxyREST(nil, nil)
	for _, p := range []string{"exec/default/web/main", "attach/default/web/main", "portForward/default/web",
		"run/default/web/main", "healthz/../exec/default/web/main", "/EXEC/default/web/main", "exec"} {
		t.Run(p, func(t *testing.T) {
			_, err := r.Connect(context.Background(), "node1", &corev1.NodeProxyOptions{Path: p}, nil)
			if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), "not served through nodes/proxy") {
				t.Errorf("got %v, want a 403 saying pod sessions are not served through nodes/proxy", err)
			}
		})
	}
	for _, p := range []string{"healthz", "debug/pprof/goroutine", "execute", "containerLogs/default/web/main"} {
		if streamingAgentPath(path.Join("/", p)) {
			t.Errorf("%s: refused, want it proxied", p)
		}
	}
}
