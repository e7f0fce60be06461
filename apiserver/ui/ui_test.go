package ui

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apiserver/pkg/authentication/authenticator"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/rest"
)

// tokenAuth accepts "Bearer alice" as alice, and nothing else.
var tokenAuth = authenticator.RequestFunc(func(r *http.Request) (*authenticator.Response, bool, error) {
	if r.Header.Get("Authorization") == "Bearer alice" {
		return &authenticator.Response{User: &user.DefaultInfo{Name: "alice", Groups: []string{"dev", user.AllAuthenticated}}}, true, nil
	}
	return nil, false, nil
})

// listOnly lets alice list the resources named, in namespace web only.
type listOnly map[string]bool

func (l listOnly) Authorize(_ context.Context, a authorizer.Attributes) (authorizer.Decision, string, error) {
	if a.GetUser().GetName() == "alice" && a.GetVerb() == "list" && (a.GetNamespace() == "web" || a.GetResource() == "nodes") && l[a.GetResource()] {
		return authorizer.DecisionAllow, "", nil
	}
	return authorizer.DecisionNoOpinion, "", nil
}

func (l listOnly) ConditionsAwareAuthorize(ctx context.Context, a authorizer.Attributes) authorizer.ConditionsAwareDecision {
	return authorizer.ConditionsAwareDecisionFromParts(l.Authorize(ctx, a))
}

func (listOnly) EvaluateConditions(context.Context, authorizer.ConditionsAwareDecision, authorizer.ConditionsData) (authorizer.Decision, string, error) {
	return authorizer.DecisionDeny, "", authorizer.ErrorConditionEvaluationNotSupported
}

func newTestUI(t *testing.T, allowed listOnly, objs ...runtime.Object) http.Handler {
	t.Helper()
	stop := make(chan struct{})
	t.Cleanup(func() { close(stop) })
	u := New(Config{Authenticator: tokenAuth, Authorizer: allowed, Loopback: &rest.Config{Host: "https://127.0.0.1:1"}, Stop: stop})
	client := fake.NewClientset(objs...)
	u.caches = newCaches(func() (kubernetes.Interface, error) { return client, nil }, stop)
	return u.Wrap(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "api") }))
}

func get(h http.Handler, path, token string) *httptest.ResponseRecorder {
	r := httptest.NewRequest(http.MethodGet, path, nil)
	if token != "" {
		r.Header.Set("Authorization", "Bearer "+token)
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w
}

func TestAnonymousGetsOnlyTheLoginPage(t *testing.T) {
	h := newTestUI(t, listOnly{"services": true})
	tests := []struct {
		name, path, token string
		code              int
		contains          string
	}{
		{name: "page", path: "/ui/", code: http.StatusOK, contains: "Log in"},
		{name: "script", path: "/ui/app.js", code: http.StatusOK, contains: "textContent"},
		{name: "bare path redirects", path: "/ui", code: http.StatusMovedPermanently},
		{name: "who am I without token", path: "/ui/api/whoami", code: http.StatusUnauthorized, contains: "Unauthorized"},
		{name: "status without token", path: "/ui/api/status?namespace=web", code: http.StatusUnauthorized, contains: "Unauthorized"},
		{name: "explain without token", path: "/ui/api/explain?namespace=web&target=svc/a", code: http.StatusUnauthorized},
		{name: "status with a wrong token", path: "/ui/api/status?namespace=web", token: "mallory", code: http.StatusUnauthorized},
		{name: "unknown endpoint", path: "/ui/api/secrets", token: "alice", code: http.StatusNotFound},
		{name: "the API is passed on", path: "/api/v1/pods", code: http.StatusOK, contains: "api"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			w := get(h, tc.path, tc.token)
			if w.Code != tc.code {
				t.Fatalf("GET %s: got %d, want %d (%s)", tc.path, w.Code, tc.code, w.Body)
			}
			if !strings.Contains(w.Body.String(), tc.contains) {
				t.Fatalf("GET %s: got %q, want it to contain %q", tc.path, w.Body, tc.contains)
			}
		})
	}
	t.Run("the page runs only its own script", func(t *testing.T) {
		w := get(h, "/ui/", "")
		if csp := w.Header().Get("Content-Security-Policy"); !strings.Contains(csp, "default-src 'self'") {
			t.Fatalf("Content-Security-Policy: got %q", csp)
		}
	})
}

// The login page asks /ui/api/whoami whether its caller is logged in:
// asked of the API, the question closed the browser's connection under
// its next request when the caller was anonymous, which failed a load of
// the map with ERR_CONNECTION_CLOSED.
func TestWhoAmI(t *testing.T) {
	h := newTestUI(t, listOnly{})
	tests := []struct {
		name, token string
		code        int
		want        string
	}{
		{name: "a user", token: "alice", code: http.StatusOK, want: `{"username":"alice"}`},
		{name: "anonymous", code: http.StatusUnauthorized},
		{name: "a token not accepted", token: "mallory", code: http.StatusUnauthorized},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			w := get(h, "/ui/api/whoami", tc.token)
			if w.Code != tc.code {
				t.Fatalf("got %d, want %d (%s)", w.Code, tc.code, w.Body)
			}
			if tc.want != "" && strings.TrimSpace(w.Body.String()) != tc.want {
				t.Errorf("got %s, want %s", w.Body, tc.want)
			}
			if c := w.Header().Get("Connection"); c != "" {
				t.Errorf("Connection: got %q, want none: the page's next request goes on this connection", c)
			}
		})
	}
}

func svc(name string, sel map[string]string) *corev1.Service {
	return &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "web", Name: name}, Spec: corev1.ServiceSpec{Selector: sel}}
}

func pod(name string, labels map[string]string) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "web", Name: name, Labels: labels}}
}

func TestStatusAsTheCaller(t *testing.T) {
	objs := []runtime.Object{svc("a", map[string]string{"app": "a"}), svc("b", nil), pod("a-1", map[string]string{"app": "a"})}
	tests := []struct {
		name       string
		allowed    listOnly
		path       string
		code       int
		wantStatus string
		wantDenied string
	}{
		{name: "may list everything", allowed: listOnly{"services": true, "pods": true, "endpointslices": true, "nodes": true, "ingresses": true},
			path: "/ui/api/status?namespace=web&service=a", code: http.StatusOK, wantStatus: "a="},
		{name: "may not list pods", allowed: listOnly{"services": true, "endpointslices": true, "nodes": true, "ingresses": true},
			path: "/ui/api/status?namespace=web", code: http.StatusOK, wantStatus: "a=unknown b=unknown", wantDenied: "pods"},
		{name: "may not list nodes", allowed: listOnly{"services": true, "pods": true, "endpointslices": true, "ingresses": true},
			path: "/ui/api/status?namespace=web&service=b", code: http.StatusOK, wantStatus: "b=", wantDenied: "nodes"},
		{name: "may not list services", allowed: listOnly{"pods": true},
			path: "/ui/api/status?namespace=web", code: http.StatusForbidden},
		{name: "another namespace", allowed: listOnly{"services": true, "pods": true},
			path: "/ui/api/status?namespace=kube-system", code: http.StatusForbidden},
		{name: "no namespace", allowed: listOnly{"services": true},
			path: "/ui/api/status", code: http.StatusBadRequest},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			w := get(newTestUI(t, tc.allowed, objs...), tc.path, "alice")
			if w.Code != tc.code {
				t.Fatalf("got %d, want %d (%s)", w.Code, tc.code, w.Body)
			}
			if tc.code != http.StatusOK {
				return
			}
			var reply StatusReply
			if err := json.Unmarshal(w.Body.Bytes(), &reply); err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, s := range reply.Services {
				st := s.Status
				if st != "unknown" {
					st = "" // the verdict itself is package explain's to test
				}
				got = append(got, s.Name+"="+st)
			}
			if strings.Join(got, " ") != tc.wantStatus {
				t.Fatalf("services: got %q, want %q", strings.Join(got, " "), tc.wantStatus)
			}
			if strings.Join(reply.Denied, ",") != tc.wantDenied {
				t.Fatalf("denied: got %q, want %q", reply.Denied, tc.wantDenied)
			}
		})
	}
}

func TestImpersonating(t *testing.T) {
	loopback := &rest.Config{Host: "https://127.0.0.1:6443", BearerToken: "server"}
	who := &user.DefaultInfo{Name: "alice", UID: "u1", Groups: []string{"dev"}, Extra: map[string][]string{"scope": {"x"}}}
	got := impersonating(loopback, who)
	if got.Impersonate.UserName != "alice" || got.Impersonate.UID != "u1" || strings.Join(got.Impersonate.Groups, ",") != "dev" || got.Impersonate.Extra["scope"][0] != "x" {
		t.Fatalf("got %+v, want alice (u1) in dev with scope=x", got.Impersonate)
	}
	if loopback.Impersonate.UserName != "" {
		t.Fatalf("the server's own config was changed: %+v", loopback.Impersonate)
	}
}

func TestCandidates(t *testing.T) {
	pods := []*corev1.Pod{
		pod("a-1", map[string]string{"app": "a", "tier": "web"}),
		pod("a-2", map[string]string{"app": "a", "tier": "db"}),
		pod("b-1", map[string]string{"app": "b", "tier": "web"}),
	}
	idx := indexPods(pods)
	tests := []struct {
		name string
		sel  map[string]string
		want string
	}{
		{name: "one label", sel: map[string]string{"app": "a"}, want: "a-1 a-2"},
		{name: "two labels", sel: map[string]string{"app": "a", "tier": "web"}, want: "a-1"},
		{name: "matches nothing: every pod, for the nearest labels", sel: map[string]string{"app": "c"}, want: "a-1 a-2 b-1"},
		{name: "no selector", sel: nil, want: "a-1 a-2 b-1"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var got []string
			for _, p := range idx.candidates(tc.sel) {
				got = append(got, p.Name)
			}
			if g := strings.Join(got, " "); g != tc.want {
				t.Fatalf("got %q, want %q", g, tc.want)
			}
		})
	}
}
