package e2e

import (
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"

	"portal.dev/portal/e2e/framework"
)

// TestUIConnectionStaysOpen restarts `portal server` and at once loads the
// service map as bench/ui does: the login page, then, with a token, the
// map. Every request of both loads must succeed over one connection.
//
// The API closes an HTTP/2 connection after any anonymous request (see
// package ui). The login page used to ask the API whether it was logged
// in, and the browser asked it for /favicon.ico, both anonymously; each
// closed the browser's connection, and a navigation the browser had just
// handed to that connection failed with net::ERR_CONNECTION_CLOSED, in
// about one load in ten. Counting connections shows the closing on every
// load, not only when the race is lost.
func TestUIConnectionStaysOpen(t *testing.T) {
	s := framework.StartServer(t)
	s.MustKubectl("create", "serviceaccount", "admin")
	s.MustKubectl("create", "clusterrolebinding", "ui-admin", "--clusterrole", "cluster-admin", "--serviceaccount", "default:admin")
	token := strings.TrimSpace(s.MustKubectl("create", "token", "admin"))
	s.Stop()
	s.Start()

	tab, cancel := chromedp.NewContext(uiBrowser(t))
	defer cancel()
	if err := chromedp.Do(tab); err != nil {
		t.Fatal(err)
	}
	var (
		mu     sync.Mutex
		conns  = map[float64][]string{} // connection id -> paths answered on it
		failed []string
	)
	err := chromedp.Listen(tab, func(ev any) {
		mu.Lock()
		defer mu.Unlock()
		switch ev := ev.(type) {
		case *network.EventResponseReceived:
			if p, ok := strings.CutPrefix(ev.Response.URL, s.URL()); ok {
				conns[ev.Response.ConnectionID] = append(conns[ev.Response.ConnectionID], p)
			}
		case *network.EventLoadingFailed:
			failed = append(failed, fmt.Sprintf("%s: %s", ev.Type, ev.ErrorText))
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := chromedp.Call(tab, network.Enable, network.EnableParams{}); err != nil {
		t.Fatal(err)
	}

	url := s.URL() + "/ui/"
	if err := chromedp.Do(tab, chromedp.Navigate(url), chromedp.WaitVisible(chromedp.ID("login-form"))); err != nil {
		t.Fatalf("login page: %v", err)
	}
	if _, err := chromedp.Run(tab, chromedp.Evaluate[chromedp.Void](fmt.Sprintf(`sessionStorage.setItem('portal-token', %q)`, token))); err != nil {
		t.Fatal(err)
	}
	if err := chromedp.Do(tab, chromedp.Navigate(url), chromedp.WaitVisible(chromedp.CSS(`body[data-loaded="true"]`))); err != nil {
		t.Fatalf("the map, right after the login page: %v", err)
	}

	mu.Lock()
	defer mu.Unlock()
	if len(failed) > 0 {
		t.Errorf("requests failed: %v", failed)
	}
	if len(conns) != 1 {
		var got []string
		for id, paths := range conns {
			got = append(got, fmt.Sprintf("connection %v: %v", id, paths))
		}
		slices.Sort(got)
		t.Errorf("the page's requests went over %d connections, want 1 (the server closed the others):\n%s", len(conns), strings.Join(got, "\n"))
	}
}
