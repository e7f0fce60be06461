package e2e

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"portal.dev/portal/internal/testcert"
)

// testBadInput: issue #18's bad input, each answered with a 4xx or an
// Event while everything else keeps being served.
func (ib *ingressBed) testBadInput(t *testing.T) {
	t.Run("a path not starting with / is refused, naming the field", ib.testInvalidPath)
	t.Run("a missing Secret or Service, a mismatched key, a Resource backend: Events, the rest served", ib.testMissingReferences)
	t.Run("a host claimed by two Ingresses: the older wins, an Event on the newer", ib.testDuplicateHost)
	t.Run("an oversized header is answered 431", func(t *testing.T) {
		header := "X-Big: " + strings.Repeat("a", 2<<20) + "\r\n"
		got := ib.rawRequest(t, "GET / HTTP/1.1\r\nHost: "+hostFor(0)+"\r\n"+header+"\r\n")
		if got.code != http.StatusRequestHeaderFieldsTooLarge {
			t.Errorf("GET / with a 2 MiB header: got %v, want 431", got)
		}
		ib.checkStillServing(t)
	})
	t.Run("malformed HTTP is answered 400", func(t *testing.T) {
		got := ib.rawRequest(t, "GET / HTTP/1.1\r\nHost: "+hostFor(0)+"\r\nno colon in this header\r\n\r\n")
		if got.code != http.StatusBadRequest {
			t.Errorf("a request with a malformed header line: got %v, want 400", got)
		}
		ib.checkStillServing(t)
	})
	t.Run("slowloris clients do not block others", ib.testSlowloris)
}

// testInvalidPath: Exact and Prefix paths must start with "/"; the API
// server refuses others with 422 Unprocessable Entity naming the field, as
// upstream's validation does.
func (ib *ingressBed) testInvalidPath(t *testing.T) {
	for _, typ := range []networkingv1.PathType{exact, prefix} {
		t.Run(string(typ), func(t *testing.T) {
			ing := ingress("bad-path", rule("bad.test", path{"foo", typ, "alpha"}))
			_, err := ib.c.NetworkingV1().Ingresses("default").Create(context.Background(), ing, metav1.CreateOptions{})
			var status apierrors.APIStatus
			if !errors.As(err, &status) || status.Status().Code != 422 {
				t.Fatalf("create an Ingress with %s path \"foo\": got %v, want 422", typ, err)
			}
			if field := "spec.rules[0].http.paths[0].path"; !strings.Contains(err.Error(), field) {
				t.Errorf("the error %q does not name the field %s", err, field)
			}
		})
	}
}

// testMissingReferences: an Ingress naming a Secret and a Service that do
// not exist, a Secret whose key does not match its certificate, and a
// Resource backend gets an Event for each; its other paths, and other
// Ingresses, are served, and the paths of the missing Service and of the
// Resource answer 503.
func (ib *ingressBed) testMissingReferences(t *testing.T) {
	ca := testcert.NewCA(t)
	mismatched := ca.Issue(t, "badkey.test")
	mismatched.KeyPEM = ca.Issue(t, "badkey.test").KeyPEM
	if _, err := ib.c.CoreV1().Secrets("default").Create(context.Background(), tlsSecret("mismatched", mismatched), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	ing := ingress("broken", rule("broken.test", path{"/", prefix, "alpha"}, path{"/ghost", prefix, "ghost"}),
		rule("nosecret.test", path{"/", prefix, "beta"}), rule("badkey.test", path{"/", prefix, "beta"}))
	ing.Spec.TLS = []networkingv1.IngressTLS{{Hosts: []string{"nosecret.test"}, SecretName: "missing-secret"},
		{Hosts: []string{"badkey.test"}, SecretName: "mismatched"}}
	// A Resource backend, which the specification allows and this
	// controller does not serve: accepted, answered 503, an Event.
	ing.Spec.Rules[0].HTTP.Paths = append(ing.Spec.Rules[0].HTTP.Paths, networkingv1.HTTPIngressPath{Path: "/bucket", PathType: ptr.To(prefix),
		Backend: networkingv1.IngressBackend{Resource: &corev1.TypedLocalObjectReference{APIGroup: ptr.To("k8s.example.com"), Kind: "StorageBucket", Name: "static-assets"}}})
	apply(t, ib.server, ing)
	ib.waitEvents(t, "broken", "missing-secret", "ghost", "mismatched", "static-assets")
	eventuallyWithin(t, 30*time.Second, "the rest of the Ingress broken served", func() (bool, string) {
		root, ghost, bucket := ib.curl("http://broken.test/"), ib.curl("http://broken.test/ghost"), ib.curl("http://broken.test/bucket")
		ok := root.code == 200 && serviceOf(root.backend) == "alpha" && ghost.code == 503 && bucket.code == 503
		return ok, fmt.Sprintf("GET http://broken.test/: got %v, want 200 from alpha; /ghost: got %v, want 503; /bucket: got %v, want 503", root, ghost, bucket)
	})
	ib.checkStillServing(t)
}

// waitEvents waits until the Events on the Ingress name each of words.
func (ib *ingressBed) waitEvents(t *testing.T, ingress string, words ...string) {
	t.Helper()
	eventuallyWithin(t, 30*time.Second, fmt.Sprintf("Events on the Ingress %s naming %v", ingress, words), func() (bool, string) {
		events, err := ib.c.CoreV1().Events("default").List(context.Background(), metav1.ListOptions{})
		if err != nil {
			return false, err.Error()
		}
		var seen []string
		for _, e := range events.Items {
			if e.InvolvedObject.Kind == "Ingress" && e.InvolvedObject.Name == ingress {
				seen = append(seen, e.Type+" "+e.Reason+": "+e.Message)
			}
		}
		all := strings.Join(seen, "\n")
		for _, w := range words {
			if !strings.Contains(all, w) {
				return false, fmt.Sprintf("none names %s; the Events:\n%s", w, all)
			}
		}
		return true, ""
	})
}

// testDuplicateHost: two Ingresses with the same host and path; the older
// one keeps serving it, as upstream controllers merge, and the newer gets
// an Event. Creation times have a resolution of a second, so the newer is
// created a second after the older. A third Ingress applied after them
// shows when the controller has taken the newer in: once its host is
// served, so is the outcome of the conflict.
func (ib *ingressBed) testDuplicateHost(t *testing.T) {
	apply(t, ib.server, ingress("dup-old", rule("dup.test", path{"/", prefix, "alpha"})))
	eventuallyWithin(t, 30*time.Second, "dup.test served", func() (bool, string) {
		a := ib.curl("http://dup.test/")
		return a.code == 200 && serviceOf(a.backend) == "alpha", fmt.Sprintf("GET http://dup.test/: got %v, want 200 from alpha", a)
	})
	old, err := ib.c.NetworkingV1().Ingresses("default").Get(context.Background(), "dup-old", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(time.Until(old.CreationTimestamp.Add(1100 * time.Millisecond)))
	apply(t, ib.server, ingress("dup-new", rule("dup.test", path{"/", prefix, "beta"})))
	apply(t, ib.server, ingress("dup-marker", rule("dup-marker.test", path{"/", prefix, "beta"})))
	ib.waitEvents(t, "dup-new", "dup.test")
	eventuallyWithin(t, 30*time.Second, "dup-marker.test served", func() (bool, string) {
		a := ib.curl("http://dup-marker.test/")
		return a.code == 200, fmt.Sprintf("GET http://dup-marker.test/: got %v, want 200", a)
	})
	if a := ib.curl("http://dup.test/"); a.code != 200 || serviceOf(a.backend) != "alpha" {
		t.Errorf("GET http://dup.test/ claimed by dup-old then dup-new: got %v, want 200 from alpha (the older)", a)
	}
}

// rawRequest writes req on a new connection to the node's port 80 while
// reading the answer (the server may answer before it has read all of a
// request it refuses) and returns the status.
func (ib *ingressBed) rawRequest(t *testing.T, req string) answer {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn, err := ib.dialNode(ctx, "tcp", ":80")
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(10 * time.Second))
	go io.WriteString(conn, req)
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		return answer{err: err}
	}
	resp.Body.Close()
	return answer{code: resp.StatusCode, backend: resp.Header.Get("X-Backend")}
}

// checkStillServing fails the test unless the first path-matching case is
// answered as before.
func (ib *ingressBed) checkStillServing(t *testing.T) {
	t.Helper()
	if a := ib.curl("http://" + hostFor(0) + "/"); a.code != 200 || serviceOf(a.backend) != "alpha" {
		t.Errorf("GET http://%s/ afterwards: got %v, want 200 from alpha", hostFor(0), a)
	}
}

// testSlowloris: 200 connections that send the start of a request and
// then nothing must not keep the controller from answering other clients,
// on plain HTTP and on TLS.
func (ib *ingressBed) testSlowloris(t *testing.T) {
	var slow []net.Conn
	defer func() {
		for _, c := range slow {
			c.Close()
		}
	}()
	for i := range 200 {
		port := ":80"
		if i%2 == 1 {
			port = ":443" // a TLS client that never sends its hello
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		c, err := ib.dialNode(ctx, "tcp", port)
		cancel()
		if err != nil {
			t.Fatalf("slow connection %d: %v", i, err)
		}
		slow = append(slow, c)
		if port == ":80" {
			io.WriteString(c, "GET / HTTP/1.1\r\nHost: "+hostFor(0)+"\r\nX-Slow: ")
		}
	}
	for i := range 5 {
		if a := ib.curl("http://" + hostFor(0) + "/"); a.code != 200 || serviceOf(a.backend) != "alpha" {
			t.Errorf("request %d beside 200 slow clients: got %v, want 200 from alpha", i, a)
		}
		if _, err := ib.handshake("a.tls.test", nil); err != nil {
			t.Errorf("TLS handshake %d beside 200 slow clients: %v", i, err)
		}
	}
}
