package e2e

import (
	"context"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"portal.dev/portal/internal/testcert"
)

// annotated is the Ingress name, whose host name.test routes / to alpha,
// with annotations.
func annotated(name string, annotations map[string]string) *networkingv1.Ingress {
	ing := ingress(name, rule(name+".test", path{"/", prefix, "alpha"}))
	ing.Annotations = annotations
	return ing
}

// testTimeoutAnnotations: an Ingress whose read timeout is 1 s, by
// Portal's annotation or by ingress-nginx's, answers 504 when its
// endpoint takes 3 s and passes a quicker answer; without the annotation
// the default (60 s) lets the slow answer through.
func (ib *ingressBed) testTimeoutAnnotations(t *testing.T) {
	for _, ing := range []*networkingv1.Ingress{
		annotated("timeout-portal", map[string]string{"portal.dev/proxy-read-timeout": "1"}),
		annotated("timeout-nginx", map[string]string{"nginx.ingress.kubernetes.io/proxy-read-timeout": "1"}),
		annotated("timeout-default", nil),
	} {
		apply(t, ib.server, ing)
	}
	for _, tc := range []struct {
		host  string
		delay string
		want  int
	}{
		{"timeout-portal.test", "100ms", 200},
		{"timeout-portal.test", "3s", 504},
		{"timeout-nginx.test", "100ms", 200},
		{"timeout-nginx.test", "3s", 504},
		{"timeout-default.test", "3s", 200},
	} {
		url := fmt.Sprintf("http://%s/?delay=%s", tc.host, tc.delay)
		// Eventually: the Ingresses take effect a moment after they are
		// applied.
		eventuallyWithin(t, 30*time.Second, "GET "+url+" answered "+fmt.Sprint(tc.want), func() (bool, string) {
			a := ib.curl(url)
			return a.code == tc.want, fmt.Sprintf("GET %s (the endpoint answers after %s): got %v, want %d", url, tc.delay, a, tc.want)
		})
	}
}

// testSSLRedirectAnnotation: plain HTTP to a host of an Ingress's spec.tls
// is redirected to HTTPS with 308, unless the Ingress says ssl-redirect
// "false", by Portal's annotation or by ingress-nginx's: then it is served
// over plain HTTP, and still over TLS.
func (ib *ingressBed) testSSLRedirectAnnotation(t *testing.T) {
	hosts := []string{"redirect-on.test", "redirect-portal.test", "redirect-nginx.test"}
	ca := testcert.NewCA(t)
	if _, err := ib.c.CoreV1().Secrets("default").Create(context.Background(), tlsSecret("redirect", ca.Issue(t, hosts...)), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, ing := range []*networkingv1.Ingress{
		annotated("redirect-on", nil),
		annotated("redirect-portal", map[string]string{"portal.dev/ssl-redirect": "false"}),
		annotated("redirect-nginx", map[string]string{"nginx.ingress.kubernetes.io/ssl-redirect": "false"}),
	} {
		ing.Spec.TLS = []networkingv1.IngressTLS{{Hosts: []string{ing.Spec.Rules[0].Host}, SecretName: "redirect"}}
		apply(t, ib.server, ing)
	}
	for _, tc := range []struct {
		url      string
		want     int
		location string
	}{
		{"http://redirect-on.test/p?q=1", 308, "https://redirect-on.test/p?q=1"},
		{"https://redirect-on.test/p?q=1", 200, ""},
		{"http://redirect-portal.test/p?q=1", 200, ""},
		{"https://redirect-portal.test/p?q=1", 200, ""},
		{"http://redirect-nginx.test/p?q=1", 200, ""},
		{"https://redirect-nginx.test/p?q=1", 200, ""},
	} {
		eventuallyWithin(t, 30*time.Second, "GET "+tc.url+" answered "+fmt.Sprint(tc.want), func() (bool, string) {
			a := ib.curl(tc.url, "-k")
			ok := a.code == tc.want && a.location == tc.location && (tc.want != 200 || serviceOf(a.backend) == "alpha")
			return ok, fmt.Sprintf("GET %s: got %v Location %q, want %d %s", tc.url, a, a.location, tc.want, tc.location)
		})
	}
}

// testExternalName: a backend Service of type ExternalName has no
// endpoints for the controller to send requests to; its path answers 503
// saying so, and an Event on the Ingress says why. ingress-nginx answers
// the same when run with --disable-svc-external-name; by default it
// proxies to the external name, which this controller does not.
func (ib *ingressBed) testExternalName(t *testing.T) {
	svc := &corev1.Service{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Service"}, ObjectMeta: metav1.ObjectMeta{Name: "external"},
		Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeExternalName, ExternalName: "www.example.com",
			Ports: []corev1.ServicePort{{Name: "http", Port: 80}}}}
	apply(t, ib.server, svc)
	apply(t, ib.server, ingress("external", rule("external.test", path{"/", prefix, "external"}, path{"/alpha", prefix, "alpha"})))
	eventuallyWithin(t, 30*time.Second, "external.test served", func() (bool, string) {
		a := ib.curl("http://external.test/alpha")
		return a.code == 200 && serviceOf(a.backend) == "alpha", fmt.Sprintf("GET http://external.test/alpha: got %v, want 200 from alpha", a)
	})
	resp, err := ib.http.Get("http://external.test/")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 503 || !strings.Contains(string(body), "ExternalName") {
		t.Errorf("GET http://external.test/ (an ExternalName Service): got %d %q, want 503 naming ExternalName", resp.StatusCode, body)
	}
	ib.waitEvents(t, "external", "ExternalName", "www.example.com")
}
