package ui

import (
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"
)

func TestListAsTheCaller(t *testing.T) {
	ready := pod("a-1", map[string]string{"app": "a"})
	ready.Spec.NodeName = "n1"
	ready.Status = corev1.PodStatus{Phase: corev1.PodRunning, PodIP: "10.0.0.1",
		Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}}
	other := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "s-1"}}
	slice := &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{Namespace: "web", Name: "a-x", Labels: map[string]string{discoveryv1.LabelServiceName: "a"}},
		Endpoints: []discoveryv1.Endpoint{
			{Addresses: []string{"10.0.0.1"}},
			{Addresses: []string{"10.0.0.2"}, Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(false)}},
		},
	}
	service := svc("a", map[string]string{"app": "a"})
	service.Spec.Ports = []corev1.ServicePort{{Name: "http", Port: 80}, {Port: 53, Protocol: corev1.ProtocolUDP}}
	objs := []runtime.Object{ready, pod("a-2", nil), other, slice, service}
	tests := []struct {
		name    string
		allowed listOnly
		path    string
		code    int
		want    string
	}{
		{name: "pods of a namespace", allowed: listOnly{"pods": true}, path: "/ui/api/list?kind=pods&namespace=web", code: http.StatusOK,
			want: `{"ns":"web","name":"a-1","labels":{"app":"a"},"node":"n1","phase":"Running","ready":true,"ip":"10.0.0.1"}` +
				` {"ns":"web","name":"a-2","labels":{},"node":"","phase":"Pending","ready":false,"ip":""}`},
		{name: "slices count ready endpoints", allowed: listOnly{"endpointslices": true}, path: "/ui/api/list?kind=endpointslices&namespace=web", code: http.StatusOK,
			want: `{"ns":"web","name":"a-x","service":"a","ready":1,"total":2}`},
		{name: "services", allowed: listOnly{"services": true}, path: "/ui/api/list?kind=services&namespace=web", code: http.StatusOK,
			want: `{"ns":"web","name":"a","type":"ClusterIP","selector":{"app":"a"},"clusterIP":"","externalName":"","ports":["http:80/TCP","53/UDP"]}`},
		{name: "may not list pods there", allowed: listOnly{"services": true}, path: "/ui/api/list?kind=pods&namespace=web", code: http.StatusForbidden,
			want: `cannot list resource \"pods\" in API group \"\" in the namespace \"web\"`},
		{name: "may not list pods in every namespace", allowed: listOnly{"pods": true}, path: "/ui/api/list?kind=pods", code: http.StatusForbidden,
			want: "at the cluster scope"},
		{name: "other kinds come from the API", allowed: listOnly{"secrets": true}, path: "/ui/api/list?kind=secrets&namespace=web", code: http.StatusBadRequest},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			w := get(newTestUI(t, tc.allowed, objs...), tc.path, "alice")
			if w.Code != tc.code {
				t.Fatalf("got %d, want %d (%s)", w.Code, tc.code, w.Body)
			}
			if tc.code != http.StatusOK {
				if !strings.Contains(w.Body.String(), tc.want) {
					t.Fatalf("got %s, want it to contain %s", w.Body, tc.want)
				}
				return
			}
			var reply struct {
				ResourceVersion *string           `json:"resourceVersion"`
				Items           []json.RawMessage `json:"items"`
			}
			if err := json.Unmarshal(w.Body.Bytes(), &reply); err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, it := range reply.Items {
				got = append(got, string(it))
			}
			slices.Sort(got) // the caches keep no order
			if g := strings.Join(got, " "); g != tc.want {
				t.Fatalf("items:\ngot  %s\nwant %s", g, tc.want)
			}
			if reply.ResourceVersion == nil {
				t.Fatalf("no resourceVersion to watch from in %s", w.Body)
			}
		})
	}
	t.Run("anonymous", func(t *testing.T) {
		if w := get(newTestUI(t, listOnly{"pods": true}, objs...), "/ui/api/list?kind=pods&namespace=web", ""); w.Code != http.StatusUnauthorized {
			t.Fatalf("got %d, want 401", w.Code)
		}
	})
}
