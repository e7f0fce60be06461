package ui

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"reflect"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/rest"

	"portal.dev/portal/proxy/status"
)

func TestTrafficAsTheCaller(t *testing.T) {
	node := func(name string) *corev1.Node { return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}} }
	counted := func(ports map[string]status.Counts) status.Traffic {
		var tr status.Traffic
		for key, c := range ports {
			tr.AddPort(key, "tcp/80", c)
		}
		return tr
	}
	// n1 and n2 count, n1 runs an Ingress controller too; n3 runs a mode
	// that does not count; n4 does not answer.
	n1, n2 := counted(map[string]status.Counts{"web/a": {Connections: 5}, "web/empty": {Refused: 2}, "secret/b": {Connections: 9}}),
		counted(map[string]status.Counts{"web/a": {Connections: 3, Refused: 1}})
	answers := map[string]nodeTraffic{
		"n1": {proxy: &n1, ingress: map[string]IngressCounts{"web/a": {Requests: 4, Errors: 1}, "secret/b": {Requests: 1}}},
		"n2": {proxy: &n2},
		"n3": {},
	}
	var mu sync.Mutex
	var askedAs []string
	ask := func(_ context.Context, who user.Info, node string) (nodeTraffic, error) {
		mu.Lock()
		askedAs = append(askedAs, who.GetName())
		mu.Unlock()
		if node == "n4" {
			return nodeTraffic{}, errors.New("no reply in time")
		}
		return answers[node], nil
	}
	tests := []struct {
		name     string
		allowed  listOnly
		path     string
		wantCode int
		want     TrafficReply
	}{
		{
			name:     "summed over nodes, only namespaces the caller may list",
			allowed:  listOnly{"nodes": true, "services": true},
			path:     "/ui/api/traffic",
			wantCode: http.StatusOK,
			want: TrafficReply{
				Services: map[string]status.Counts{"web/a": {Connections: 8, Refused: 1}, "web/empty": {Refused: 2}},
				Ingress:  map[string]IngressCounts{"web/a": {Requests: 4, Errors: 1}},
				Nodes:    4, Counted: 2, IngressCounted: 1, Problems: []string{"node n4: no reply in time"},
			},
		},
		{
			name:     "one namespace asked for",
			allowed:  listOnly{"nodes": true, "services": true},
			path:     "/ui/api/traffic?namespace=other",
			wantCode: http.StatusOK,
			want: TrafficReply{Services: map[string]status.Counts{}, Ingress: map[string]IngressCounts{},
				Nodes: 4, Counted: 2, IngressCounted: 1, Problems: []string{"node n4: no reply in time"}},
		},
		{
			name:     "a caller who may not list nodes is refused",
			allowed:  listOnly{"services": true},
			path:     "/ui/api/traffic",
			wantCode: http.StatusForbidden,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			askedAs = nil
			stop := make(chan struct{})
			t.Cleanup(func() { close(stop) })
			u := New(Config{Authenticator: tokenAuth, Authorizer: tc.allowed, Loopback: &rest.Config{Host: "https://127.0.0.1:1"}, Stop: stop})
			client := fake.NewClientset(node("n1"), node("n2"), node("n3"), node("n4"))
			u.caches = newCaches(func() (kubernetes.Interface, error) { return client, nil }, stop)
			u.askTraffic = ask
			h := u.Wrap(http.NotFoundHandler())
			w := get(h, tc.path, "alice")
			if w.Code != tc.wantCode {
				t.Fatalf("got %d %s, want %d", w.Code, w.Body, tc.wantCode)
			}
			if tc.wantCode != http.StatusOK {
				return
			}
			var got TrafficReply
			if err := json.Unmarshal(w.Body.Bytes(), &got); err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("got %+v, want %+v", got, tc.want)
			}
			for _, as := range askedAs {
				if as != "alice" {
					t.Errorf("a node was asked as %q, want alice", as)
				}
			}
		})
	}
}
