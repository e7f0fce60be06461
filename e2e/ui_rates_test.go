package e2e

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
)

// TestUIRates drives traffic through Services' cluster IPs and through
// the Ingress controller on a bed whose nodes run the proxy, and checks
// that the service map shows it: a Service that answers gets a connection
// rate and a request rate, one without endpoints an error rate (refused
// connections, 5xx through the Ingress), and the explain panel of the
// clicked Service repeats it. The rates come from the node proxies'
// nftables counters and the Ingress controller's, through the agents and
// the API server's nodes/NAME/proxy.
func TestUIRates(t *testing.T) {
	eb := newTwoNodeBed(t, "--http-port", "8088", "--https-port", "8443")
	web := map[string]string{"app": "web"}
	rule := func(host, svc string) networkingv1.IngressRule {
		return networkingv1.IngressRule{Host: host, IngressRuleValue: networkingv1.IngressRuleValue{HTTP: &networkingv1.HTTPIngressRuleValue{
			Paths: []networkingv1.HTTPIngressPath{{Path: "/", PathType: ptr.To(networkingv1.PathTypePrefix), Backend: networkingv1.IngressBackend{
				Service: &networkingv1.IngressServiceBackend{Name: svc, Port: networkingv1.ServiceBackendPort{Number: 80}}}}}}}}
	}
	eb.create(
		eb.listener("web-1", "node1", web),
		selectorService("web", web, intstr.FromString("http")),
		selectorService("empty", map[string]string{"app": "nobody"}, intstr.FromInt32(8080)),
		&networkingv1.Ingress{ObjectMeta: metav1.ObjectMeta{Name: "site"}, Spec: networkingv1.IngressSpec{
			Rules: []networkingv1.IngressRule{rule("web.test", "web"), rule("empty.test", "empty")}}},
	)
	ctx := context.Background()
	clusterIP := func(name string) string {
		svc, err := eb.c.CoreV1().Services("default").Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return svc.Spec.ClusterIP + ":80"
	}
	webAddr, emptyAddr := clusterIP("web"), clusterIP("empty")
	client := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{DialContext: eb.node1.DialContext, DisableKeepAlives: true}}
	eventuallyWithin(t, 60*time.Second, "web answers through its cluster IP from node1", func() (bool, string) {
		resp, err := client.Get("http://" + webAddr + "/")
		if err != nil {
			return false, err.Error()
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK, resp.Status
	})

	eb.s.MustKubectl("-n", "default", "create", "serviceaccount", "ui-admin")
	eb.s.MustKubectl("create", "clusterrolebinding", "ui-rates-admin", "--clusterrole", "cluster-admin", "--serviceaccount", "default:ui-admin")
	token := strings.TrimSpace(eb.s.MustKubectl("-n", "default", "create", "token", "ui-admin"))

	// The browser runs outside the bed; it reaches the API server through
	// a forwarder into node1's namespace.
	url := uiForward(t, func(ctx context.Context) (net.Conn, error) {
		return eb.node1.DialContext(ctx, "tcp", "10.100.1.1:6443")
	})
	browser := uiBrowser(t)
	tab, cancel := chromedp.NewContext(browser)
	defer cancel()
	uiLogin(t, tab, url+"/ui/", token)

	// Traffic from node1 for the rest of the test, every 100 ms: a request
	// to web and a refused connection to empty through their cluster IPs,
	// and a request to each through the Ingress controller.
	viaIngress := func(host string) {
		req, _ := http.NewRequest(http.MethodGet, "http://10.100.1.1:8088/", nil)
		req.Host = host
		if resp, err := client.Do(req); err == nil {
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			case <-time.After(100 * time.Millisecond):
			}
			if resp, err := client.Get("http://" + webAddr + "/"); err == nil {
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			}
			if c, err := eb.node1.DialContext(ctx, "tcp", emptyAddr); err == nil {
				c.Close()
			}
			viaIngress("web.test")
			viaIngress("empty.test")
		}
	}()
	defer func() { close(stop); wg.Wait() }()

	card := func(name string) string {
		return fmt.Sprintf(`document.querySelector('.svc[data-key="default/%s"]')`, name)
	}
	uiWaitRate(t, tab, card("web"), "conn", 45*time.Second)
	uiWaitRate(t, tab, card("empty"), "refused", 45*time.Second)
	uiWaitRate(t, tab, card("web"), "req", 45*time.Second)
	uiWaitRate(t, tab, card("empty"), "err5xx", 45*time.Second)
	for _, name := range []string{"web", "empty"} {
		t.Logf("%s's card: %s", name, uiEval[string](t, tab, card(name)+`.querySelector('.rate').textContent`))
	}
	if got := uiEval[string](t, tab, card("web")+`.querySelector('.rate').textContent`); !strings.Contains(got, "conn/s") || !strings.Contains(got, "req/s") {
		t.Errorf("web's card: got rate %q, want connections and requests per second", got)
	}
	if got := uiEval[string](t, tab, card("empty")+`.dataset.conn`); got != "0" {
		t.Errorf("empty's card: got a connection rate of %q, want 0 (it has no endpoint)", got)
	}
	if got := uiEval[string](t, tab, card("web")+`.dataset.err5xx`); got != "0" {
		t.Errorf("web's card: got a 5xx rate of %q, want 0", got)
	}
	if err := chromedp.Do(tab, chromedp.Click(chromedp.CSS(`.svc[data-key="default/web"]`))); err != nil {
		t.Fatal(err)
	}
	pollCtx, cancelPoll := context.WithTimeout(tab, 15*time.Second)
	defer cancelPoll()
	if _, err := chromedp.Run(pollCtx, chromedp.Poll[chromedp.Void](`document.getElementById('detail-rate').textContent.includes('conn/s')`,
		chromedp.WithPollingInterval(100*time.Millisecond))); err != nil {
		t.Errorf("the explain panel of web shows no rate (%q): %v", uiEval[string](t, tab, `document.getElementById('detail-rate').textContent`), err)
	}
	uiScreenshot(t, tab, "ui-rates.png")
}

// uiWaitRate waits until the card expr finds has a positive rate in
// data-KEY: "conn" and "refused" (connections per second through the
// proxies), "req" and "err5xx" (requests through the Ingress controllers).
func uiWaitRate(t *testing.T, tab context.Context, expr, key string, timeout time.Duration) {
	t.Helper()
	ctx, cancel := context.WithTimeout(tab, timeout+5*time.Second)
	defer cancel()
	_, err := chromedp.Run(ctx, chromedp.Poll[chromedp.Void](fmt.Sprintf(`Number((%s || {dataset: {}}).dataset[%q] || 0) > 0`, expr, key),
		chromedp.WithPollingInterval(100*time.Millisecond), chromedp.WithPollingTimeout(timeout)))
	if err != nil {
		text := uiEval[string](t, tab, fmt.Sprintf(`((%s || {}).innerText || 'missing')`, expr))
		notices := uiEval[string](t, tab, `document.getElementById('notices').textContent`)
		t.Fatalf("%s: no %s rate after %v; card says %q, notices %q", expr, key, timeout, text, notices)
	}
}

// uiForward listens on a local port and forwards each connection to what
// dial returns; it returns the https URL of the local port.
func uiForward(t *testing.T, dial func(ctx context.Context) (net.Conn, error)) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if errors.Is(err, net.ErrClosed) {
				return
			} else if err != nil {
				continue
			}
			go func() {
				defer c.Close()
				up, err := dial(context.Background())
				if err != nil {
					return
				}
				defer up.Close()
				go io.Copy(up, c)
				io.Copy(c, up)
			}()
		}
	}()
	return "https://" + ln.Addr().String()
}
