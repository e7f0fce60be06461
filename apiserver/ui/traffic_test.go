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
	// n1 and n2 count; n3 runs a mode that does not; n4 does not answer.
	answers := map[string]status.Traffic{
		"n1": counted(map[string]status.Counts{"web/a": {Connections: 5}, "web/empty": {Refused: 2}, "secret/b": {Connections: 9}}),
		"n2": counted(map[string]status.Counts{"web/a": {Connections: 3, Refused: 1}}),
	}
	var mu sync.Mutex
	var askedAs []string
	ask := func(_ context.Context, who user.Info, node string) (status.Traffic, error) {
		mu.Lock()
		askedAs = append(askedAs, who.GetName())
		mu.Unlock()
		switch node {
		case "n3":
			return status.Traffic{}, errNotCounted
		case "n4":
			return status.Traffic{}, errors.New("no reply in time")
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
				Nodes:    4, Counted: 2, Problems: []string{"node n4: no reply in time"},
			},
		},
		{
			name:     "one namespace asked for",
			allowed:  listOnly{"nodes": true, "services": true},
			path:     "/ui/api/traffic?namespace=other",
			wantCode: http.StatusOK,
			want:     TrafficReply{Services: map[string]status.Counts{}, Nodes: 4, Counted: 2, Problems: []string{"node n4: no reply in time"}},
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
