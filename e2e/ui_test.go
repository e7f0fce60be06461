package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"portal.dev/portal/e2e/framework"
)

// TestUIMap loads the service map in headless Chromium against `portal
// server`: anonymous clients get the login page and nothing else, a user
// with a token sees the map, a Service whose selector is broken turns red
// and turns green again once fixed, and a user who may read one namespace
// is told what they may not see.
func TestUIMap(t *testing.T) {
	s := framework.StartServer(t)
	c := s.Client()
	s.MustKubectl("create", "namespace", "shop")
	makeNode(t, c, "node-a", "zone-a")
	uiSetNodeReady(t, c, "node-a")
	for i := range 3 {
		makePod(t, c, "shop", podSpec{name: fmt.Sprintf("web-%d", i), labels: map[string]string{"app": "web"},
			node: "node-a", ip: fmt.Sprintf("10.244.0.%d", 10+i), ready: true})
	}
	makePod(t, c, "shop", podSpec{name: "cart-0", labels: map[string]string{"app": "cart"}, node: "node-a", ip: "10.244.0.20", ready: true})
	s.MustKubectl("-n", "shop", "create", "service", "clusterip", "web", "--tcp", "80:8080")
	s.MustKubectl("-n", "shop", "create", "service", "clusterip", "cart", "--tcp", "80:8080")
	s.MustKubectl("-n", "shop", "patch", "service", "cart", "-p", `{"spec":{"selector":{"app":"cart"}}}`)
	s.MustKubectl("-n", "shop", "patch", "service", "web", "-p", `{"spec":{"selector":{"app":"web"}}}`)
	s.MustKubectl("-n", "shop", "create", "serviceaccount", "admin")
	s.MustKubectl("create", "clusterrolebinding", "ui-admin", "--clusterrole", "cluster-admin", "--serviceaccount", "shop:admin")
	adminToken := strings.TrimSpace(s.MustKubectl("-n", "shop", "create", "token", "admin"))

	browser := uiBrowser(t)

	t.Run("anonymous gets the login page only", func(t *testing.T) {
		tab, cancel := chromedp.NewContext(browser)
		defer cancel()
		if err := chromedp.Do(tab, chromedp.Navigate(s.URL()+"/ui/"), chromedp.WaitVisible(chromedp.ID("login-form"))); err != nil {
			t.Fatal(err)
		}
		loginShown := uiEval[bool](t, tab, `!document.getElementById('login').hidden`)
		appShown := uiEval[bool](t, tab, `!document.getElementById('app').hidden`)
		text := uiEval[string](t, tab, `document.body.innerText`)
		apiStatus := uiEval[int](t, tab, `fetch('/api/v1/pods').then(r => r.status)`)
		uiStatus := uiEval[int](t, tab, `fetch('/ui/api/status?namespace=shop').then(r => r.status)`)
		if !loginShown || appShown {
			t.Fatalf("login shown %v, map shown %v; want the login page alone", loginShown, appShown)
		}
		if strings.Contains(text, "web") || strings.Contains(text, "node-a") {
			t.Fatalf("the anonymous page shows cluster data: %q", text)
		}
		if apiStatus != 401 || uiStatus != 401 {
			t.Fatalf("anonymous /api/v1/pods got %d, /ui/api/status got %d; want 401 and 401", apiStatus, uiStatus)
		}
	})

	tab, cancel := chromedp.NewContext(browser)
	defer cancel()
	web := `document.querySelector('.svc[data-key="shop/web"]')`
	ok := t.Run("log in and see the map", func(t *testing.T) {
		uiLogin(t, tab, s.URL()+"/ui/", adminToken)
		uiWaitStatus(t, tab, web, "ok", 30*time.Second)
		pods := uiEval[int](t, tab, web+`.querySelectorAll('.pod.ready').length`)
		if pods != 3 {
			t.Fatalf("web shows %d ready pods, want 3", pods)
		}
	})
	// The page lists pods from the server's caches and watches them through
	// the API from the caches' resourceVersion: a pod made after the load
	// must reach the card, and leave it.
	ok = ok && t.Run("pods added and deleted after the load show", func(t *testing.T) {
		readyPods := web + `.querySelectorAll('.pod.ready').length`
		makePod(t, c, "shop", podSpec{name: "web-late", labels: map[string]string{"app": "web"}, node: "node-a", ip: "10.244.0.30", ready: true})
		uiWaitEval(t, tab, readyPods+` === 4`, 10*time.Second)
		// No agent runs to finish a graceful delete.
		if err := c.CoreV1().Pods("shop").Delete(context.Background(), "web-late", metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)}); err != nil {
			t.Fatal(err)
		}
		uiWaitEval(t, tab, readyPods+` === 3`, 10*time.Second)
	})
	ok = ok && t.Run("a broken selector turns red, the fix green", func(t *testing.T) {
		s.MustKubectl("-n", "shop", "patch", "service", "web", "-p", `{"spec":{"selector":{"app":"wbe"}}}`)
		took := uiWaitStatus(t, tab, web, "broken", 10*time.Second)
		t.Logf("red %v after the break", took)
		if took > 2*time.Second {
			t.Errorf("the map turned red %v after the break, want within 2s", took)
		}
		err := chromedp.Do(tab, chromedp.Click(chromedp.CSS(`.svc[data-key="shop/web"]`)),
			chromedp.WaitVisible(chromedp.CSS(`#detail-steps li`)))
		if err != nil {
			t.Fatal(err)
		}
		if got := uiEval[string](t, tab, `document.getElementById('detail-steps').textContent`); !strings.Contains(got, "app=wbe") {
			t.Errorf("explain of the broken Service: got %q, want the selector named", got)
		}
		uiScreenshot(t, tab, "ui-map-broken.png")
		s.MustKubectl("-n", "shop", "patch", "service", "web", "--type", "merge", "-p", `{"spec":{"selector":{"app":"web"}}}`)
		took = uiWaitStatus(t, tab, web, "ok", 10*time.Second)
		t.Logf("green %v after the fix", took)
		if took > 2*time.Second {
			t.Errorf("the map turned green %v after the fix, want within 2s", took)
		}
	})
	ok = ok && t.Run("clicking a Service explains it", func(t *testing.T) {
		err := chromedp.Do(tab,
			chromedp.Click(chromedp.CSS(`.svc[data-key="shop/cart"]`)),
			chromedp.WaitVisible(chromedp.CSS(`#detail-steps li`)),
		)
		if err != nil {
			t.Fatal(err)
		}
		title := uiEval[string](t, tab, `document.getElementById('detail-title').textContent`)
		if !strings.Contains(title, "cart") {
			t.Fatalf("detail title: got %q, want the cart Service", title)
		}
		uiScreenshot(t, tab, "ui-map.png")
	})

	t.Run("a user who may read one namespace is told what they cannot see", func(t *testing.T) {
		s.MustKubectl("-n", "shop", "create", "serviceaccount", "viewer")
		s.MustKubectl("-n", "shop", "create", "rolebinding", "viewer", "--clusterrole", "view", "--serviceaccount", "shop:viewer")
		token := strings.TrimSpace(s.MustKubectl("-n", "shop", "create", "token", "viewer"))
		tab, cancel := chromedp.NewContext(browser)
		defer cancel()
		uiLogin(t, tab, s.URL()+"/ui/?namespace=shop", token)
		uiWaitStatus(t, tab, web, "ok", 30*time.Second)
		notices := uiEval[string](t, tab, `document.getElementById('notices').textContent`)
		if !strings.Contains(notices, "You may not list nodes") {
			t.Fatalf("notices: got %q, want one saying nodes cannot be listed", notices)
		}
	})
}

// uiEval evaluates expr in the tab, awaiting it when it is a promise.
func uiEval[T any](t *testing.T, tab context.Context, expr string) T {
	t.Helper()
	v, err := chromedp.Run(tab, chromedp.Evaluate[T](expr, chromedp.EvalAwaitPromise))
	if err != nil {
		t.Fatalf("evaluate %s: %v", expr, err)
	}
	return v
}

// uiBrowser starts Debian's headless Chromium for the test. It runs as
// root in CI, where Chromium's sandbox cannot start, hence --no-sandbox;
// the server's certificate is from the test's own CA.
func uiBrowser(t *testing.T) context.Context {
	t.Helper()
	path, err := exec.LookPath("chromium")
	if err != nil {
		t.Skip("chromium is not installed (hack/deps.sh installs it)")
	}
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(path), chromedp.NoSandbox, chromedp.Headless, chromedp.DisableGPU,
		chromedp.IgnoreCertErrors, chromedp.WindowSize(1280, 800))
	// No step of a test takes long; the bound ends a hung browser.
	bounded, cancelBound := context.WithTimeout(context.Background(), 5*time.Minute)
	t.Cleanup(cancelBound)
	alloc, cancelAlloc := chromedp.NewExecAllocator(bounded, opts...)
	t.Cleanup(cancelAlloc)
	ctx, cancel := chromedp.NewContext(alloc)
	t.Cleanup(cancel)
	if err := chromedp.Do(ctx); err != nil {
		t.Fatalf("start chromium: %v", err)
	}
	return ctx
}

// uiLogin opens url, logs in with token and waits for the first full map.
func uiLogin(t *testing.T, tab context.Context, url, token string) {
	t.Helper()
	// The tab opens on its first action, and lives as long as the context
	// of that action: open it on tab itself, not on the bounded one below.
	if err := chromedp.Do(tab); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(tab, 60*time.Second)
	defer cancel()
	err := chromedp.Do(ctx,
		chromedp.Navigate(url),
		chromedp.WaitVisible(chromedp.ID("token")),
		chromedp.SendKeys(chromedp.ID("token"), token),
		chromedp.Click(chromedp.CSS(`#login-form button[type="submit"]`)),
		chromedp.WaitVisible(chromedp.CSS(`body[data-loaded="true"]`)),
	)
	if err != nil {
		msg, _ := chromedp.Run(tab, chromedp.Evaluate[string](`document.getElementById('login-error').textContent + ' | ' + document.getElementById('notices').textContent`))
		t.Fatalf("log in at %s: %v (page says %q)", url, err, msg)
	}
}

// uiWaitStatus waits until the element expr finds shows status, and says
// how long that took; it fails the test after timeout.
func uiWaitStatus(t *testing.T, tab context.Context, expr, status string, timeout time.Duration) time.Duration {
	t.Helper()
	start := time.Now()
	ctx, cancel := context.WithTimeout(tab, timeout+5*time.Second)
	defer cancel()
	_, err := chromedp.Run(ctx, chromedp.Poll[chromedp.Void](fmt.Sprintf(`(%s || {dataset: {}}).dataset.status === %q`, expr, status),
		chromedp.WithPollingInterval(20*time.Millisecond), chromedp.WithPollingTimeout(timeout)))
	if err != nil {
		got := uiEval[string](t, tab, fmt.Sprintf(`(%s || {dataset: {}}).dataset.status || 'missing'`, expr))
		why := uiEval[string](t, tab, fmt.Sprintf(`((%s || {}).innerText || '')`, expr))
		t.Fatalf("%s: got status %s (%q) after %v, want %s", expr, got, why, timeout, status)
	}
	return time.Since(start)
}

// uiWaitEval waits until expr is true in the tab; it fails the test,
// saying what the card shows, after timeout.
func uiWaitEval(t *testing.T, tab context.Context, expr string, timeout time.Duration) {
	t.Helper()
	ctx, cancel := context.WithTimeout(tab, timeout+5*time.Second)
	defer cancel()
	_, err := chromedp.Run(ctx, chromedp.Poll[chromedp.Void](expr,
		chromedp.WithPollingInterval(20*time.Millisecond), chromedp.WithPollingTimeout(timeout)))
	if err != nil {
		t.Fatalf("waiting %v for %s: %v (summary %q)", timeout, expr, err, uiEval[string](t, tab, `document.getElementById('summary').textContent`))
	}
}

// uiScreenshot writes the tab's viewport as a PNG into the test's
// artifact directory and prints where.
func uiScreenshot(t *testing.T, tab context.Context, name string) {
	t.Helper()
	png, err := chromedp.Run(tab, chromedp.CaptureScreenshot())
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.ArtifactDir(), name)
	if err := os.WriteFile(path, png, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshot: %s", path)
}

func uiSetNodeReady(t *testing.T, c kubernetes.Interface, name string) {
	t.Helper()
	patch := fmt.Sprintf(`{"status":{"conditions":[{"type":"Ready","status":"True","reason":"Test","lastHeartbeatTime":%q,"lastTransitionTime":%q}]}}`,
		time.Now().UTC().Format(time.RFC3339), time.Now().UTC().Format(time.RFC3339))
	if _, err := c.CoreV1().Nodes().Patch(context.Background(), name, types.StrategicMergePatchType, []byte(patch), metav1.PatchOptions{}, "status"); err != nil {
		t.Fatalf("node %s Ready: %v", name, err)
	}
}
