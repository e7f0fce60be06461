package scheme

import (
	"net/url"
	"reflect"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

func TestStreamOptionsFromQuery(t *testing.T) {
	cases := []struct {
		name    string
		query   string
		into    runtime.Object
		want    runtime.Object
		wantErr string
	}{
		{name: "kubectl exec -i", query: "command=sh&command=-c&command=echo+hi&container=web&stdin=true&stdout=true&stderr=true",
			into: &corev1.PodExecOptions{},
			want: &corev1.PodExecOptions{Command: []string{"sh", "-c", "echo hi"}, Container: "web", Stdin: true, Stdout: true, Stderr: true}},
		{name: "kubectl exec -it", query: "command=sh&stdin=true&stdout=true&tty=true", into: &corev1.PodExecOptions{},
			want: &corev1.PodExecOptions{Command: []string{"sh"}, Stdin: true, Stdout: true, TTY: true}},
		{name: "kubectl attach", query: "container=main&stdout=1&stderr=1", into: &corev1.PodAttachOptions{},
			want: &corev1.PodAttachOptions{Container: "main", Stdout: true, Stderr: true}},
		{name: "port-forward ports", query: "ports=80&ports=8080", into: &corev1.PodPortForwardOptions{},
			want: &corev1.PodPortForwardOptions{Ports: []int32{80, 8080}}},
		{name: "node proxy path", query: "path=healthz", into: &corev1.NodeProxyOptions{},
			want: &corev1.NodeProxyOptions{Path: "healthz"}},
		{name: "bad boolean names the parameter", query: "command=true&stdin=maybe", into: &corev1.PodExecOptions{}, wantErr: "stdin"},
		{name: "bad port names the parameter", query: "ports=http", into: &corev1.PodPortForwardOptions{}, wantErr: "ports"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			q, _ := url.ParseQuery(tc.query)
			err := ParameterCodec.DecodeParameters(q, corev1.SchemeGroupVersion, tc.into)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("got %v, want an error naming %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			// The decoder sets the kind; compare the options only.
			tc.into.GetObjectKind().SetGroupVersionKind(tc.want.GetObjectKind().GroupVersionKind())
			if !reflect.DeepEqual(tc.into, tc.want) {
				t.Errorf("got %+v, want %+v", tc.into, tc.want)
			}
		})
	}
}
