package explain

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"

	"portal.dev/portal/agent/httpprobe"
)

func TestJudgeAnswer(t *testing.T) {
	tests := []struct {
		name    string
		res     httpprobe.Result
		want    Status
		wantMsg string
	}{
		{"200 reaches the Service", httpprobe.Result{Scheme: "http", Host: "web.example", Path: "/", Status: 200, Millis: 3},
			StatusOK, "web.example/ (GET http://web.example/ from node1) answers 200 OK in 3ms"},
		{"the redirect of a TLS host to HTTPS", httpprobe.Result{Scheme: "http", Host: "web.example", Path: "/", Status: 308, Location: "https://web.example/"},
			StatusOK, "answers 308 Permanent Redirect in 0ms, the redirect to HTTPS"},
		{"the backend's own redirect", httpprobe.Result{Scheme: "http", Host: "web.example", Path: "/docs", Status: 301, Location: "/docs/"},
			StatusOK, "a redirect to /docs/"},
		{"the backend's own 404: the rule reaches it", httpprobe.Result{Scheme: "http", Host: "web.example", Path: "/api", Status: 404, Body: "Not Found"},
			StatusOK, "from the backend: the rule reaches it, and it has no page at /api"},
		{"the controller's 404: no rule matched", httpprobe.Result{Scheme: "http", Host: "web.example", Path: "/", Status: 404, Body: "404 Not Found: " + noRuleText + "\n"},
			StatusWarning, "the controller has no rule for this host and path"},
		{"a 403", httpprobe.Result{Scheme: "https", Host: "web.example", Path: "/", Status: 403, Body: "denied"},
			StatusWarning, "answers 403 Forbidden in 0ms: denied"},
		{"503 from a missing Service port", httpprobe.Result{Scheme: "http", Path: "/", Address: "127.0.0.1:80", Status: 503, Body: "503 Service Unavailable: service default/typo has no port 8080\n"},
			StatusBroken, "(GET http://127.0.0.1:80/ from node1) answers 503 Service Unavailable in 0ms: 503 Service Unavailable: service default/typo has no port 8080"},
		{"502", httpprobe.Result{Scheme: "http", Path: "/", Status: 502}, StatusBroken, "answers 502 Bad Gateway"},
		{"504", httpprobe.Result{Scheme: "http", Path: "/", Status: 504}, StatusBroken, "answers 504 Gateway Timeout"},
		{"the backend's own 500", httpprobe.Result{Scheme: "http", Path: "/", Status: 500}, StatusWarning, "answers 500 Internal Server Error"},
		{"no answer", httpprobe.Result{Scheme: "http", Host: "web.example", Path: "/", Address: "127.0.0.1:80", Error: "connection refused: nothing listens there"},
			StatusBroken, "no answer from the Ingress controller at 127.0.0.1:80: connection refused"},
		{"a body with escapes comes out escaped", httpprobe.Result{Scheme: "http", Path: "/", Status: 503, Body: "\x1b[31mdown"},
			StatusBroken, `\x1b[31mdown`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, msg := judgeAnswer("web.example/", "node1", tc.res)
			if got != tc.want || !strings.Contains(msg, tc.wantMsg) {
				t.Errorf("got %s %q, want %s containing %q", got, msg, tc.want, tc.wantMsg)
			}
		})
	}
}

func TestProbeRequest(t *testing.T) {
	ing := &networkingv1.Ingress{Spec: networkingv1.IngressSpec{TLS: []networkingv1.IngressTLS{{Hosts: []string{"secure.example", "*.wild.example"}}}}}
	tests := []struct {
		name string
		ref  backendRef
		want httpprobe.Request
	}{
		{"a plain rule", backendRef{host: "web.example", path: "/api"}, httpprobe.Request{Scheme: "http", Host: "web.example", Path: "/api"}},
		{"the default backend", backendRef{}, httpprobe.Request{Scheme: "http", Path: "/"}},
		{"a TLS host", backendRef{host: "secure.example", path: "/"}, httpprobe.Request{Scheme: "https", Host: "secure.example", Path: "/"}},
		{"a wildcard host under a TLS wildcard", backendRef{host: "*.wild.example"}, httpprobe.Request{Scheme: "https", Host: "portal-explain.wild.example", Path: "/"}},
		{"a regular expression path is asked at /", backendRef{host: "web.example", path: "/api/(v1|v2)?x"}, httpprobe.Request{Scheme: "http", Host: "web.example", Path: "/"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := probeRequest(ing, tc.ref); got != tc.want {
				t.Errorf("got %+v, want %+v", got, tc.want)
			}
		})
	}
}

// TestExplainIngressAnswers: the Ingress step carries what the controller
// answered, from the node its status publishes, and judges by it.
func TestExplainIngressAnswers(t *testing.T) {
	site := func(port int32) *networkingv1.Ingress {
		return &networkingv1.Ingress{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "site"},
			Spec: networkingv1.IngressSpec{Rules: []networkingv1.IngressRule{{Host: "web.example", IngressRuleValue: networkingv1.IngressRuleValue{
				HTTP: &networkingv1.HTTPIngressRuleValue{Paths: []networkingv1.HTTPIngressPath{{Path: "/", Backend: networkingv1.IngressBackend{
					Service: &networkingv1.IngressServiceBackend{Name: "web", Port: networkingv1.ServiceBackendPort{Number: port}}}}}}}}}},
			Status: networkingv1.IngressStatus{LoadBalancer: networkingv1.IngressLoadBalancerStatus{Ingress: []networkingv1.IngressLoadBalancerIngress{{IP: "10.0.0.2"}}}}}
	}
	objects := func(ing *networkingv1.Ingress) []runtime.Object {
		return []runtime.Object{readyNode("node1"), withAddress(readyNode("node2"), "10.0.0.2"), webPod("web-1", "node1", "10.244.1.5", true, nil),
			webSlice(ep("10.244.1.5", "node1", true)), webService(nil), ing}
	}
	proxies := fakeNodes{}.proxy
	tests := []struct {
		name       string
		target     string
		ing        *networkingv1.Ingress
		ingress    map[string]httpprobe.Result
		wantStatus Status
		wantMsg    string
	}{
		{"a healthy rule answers 200", "svc/web", site(80), map[string]httpprobe.Result{"node2": {Status: 200, Body: "hello"}},
			StatusOK, "1 route(s) to this Service: web.example/ (GET http://web.example/ from node2) answers 200 OK"},
		{"a missing Service port answered 503", "ingress/site", site(8080), map[string]httpprobe.Result{"node2": {Status: 503, Body: "503 Service Unavailable: service default/web has no port 8080"}},
			StatusBroken, "web.example/: Service web has no port 8080 (its ports: http 80/TCP->http); the Ingress controller: web.example/ (GET http://web.example/ from node2) answers 503"},
		{"no answer is broken", "ingress/site", site(80), map[string]httpprobe.Result{"node2": {Error: "no answer within 500ms"}},
			StatusBroken, "no answer from the Ingress controller at 127.0.0.1:80: no answer within 500ms"},
		{"no node running a controller leaves the rule as the objects say", "svc/web", site(80), nil,
			StatusOK, "no request sent: no node asked (node2, node1) runs an Ingress controller"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			nodes := fakeNodes{proxy: proxies, ingress: tc.ingress}
			e := New(Config{Client: fake.NewClientset(objects(tc.ing)...), DNS: healthyDNS, Nodes: nodes})
			r, err := e.Explain(context.Background(), "default", tc.target)
			if err != nil {
				t.Fatalf("Explain: %v", err)
			}
			var step *Step
			for i := range r.Steps {
				if r.Steps[i].Name == "ingress/default/site" && len(r.Steps[i].Answers) > 0 {
					step = &r.Steps[i]
				}
			}
			out, _ := json.Marshal(r)
			if step == nil {
				t.Fatalf("no ingress step with answers: %s", out)
			}
			if step.Status != tc.wantStatus || !strings.Contains(step.Message, tc.wantMsg) {
				t.Errorf("got %s %q, want %s containing %q", step.Status, step.Message, tc.wantStatus, tc.wantMsg)
			}
			if tc.ingress != nil && !strings.Contains(string(out), `"answers":[{"rule":"web.example/","node":"node2"`) {
				t.Errorf("the JSON report does not carry the answer from node2: %s", out)
			}
		})
	}
}
