package e2e

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/keyutil"
	"k8s.io/utils/ptr"

	"portal.dev/portal/agent"
	"portal.dev/portal/e2e/framework"
	"portal.dev/portal/e2e/testbed"
)

// tokenBed is one node, node1, in its own network namespace running
// `portal server` with everything but Ingress (API, controllers, DNS, proxy
// and agent, each as its own identity, under the default Node,RBAC
// authorization), so that pods reach the API as kubernetes.default
// through the proxy. newTokenBed adds extraArgs to the server's flags.
type tokenBed struct {
	t      *testing.T
	s      *framework.Server
	c      kubernetes.Interface
	client string // the in-cluster client program
	root   string // the agent's state
}

func newTokenBed(t *testing.T, extraArgs ...string) *tokenBed {
	b := testbed.New(t)
	node1, peer := b.Namespace("sa1"), b.Namespace("sa2")
	b.Link(node1, "10.100.1.1/24", peer, "10.100.1.2/24")
	// A connect to a ClusterIP needs a route before the proxy rewrites it.
	node1.MustRun("ip", "route", "add", "default", "via", "10.100.1.2")
	s := &framework.Server{Command: "server", DataDir: t.TempDir(), Port: 6443,
		Args: []string{"--bind-address", "0.0.0.0", "--advertise-address", "10.100.1.1",
			"--hostname-override", "node1", "--node-ip", "10.100.1.1", "--node-monitor-grace-period", "1h",
			"--disable", "ingress"},
		Wrap: []string{"ip", "netns", "exec", node1.Name},
		Dial: node1.DialContext,
	}
	s.Args = append(s.Args, extraArgs...)
	framework.Attach(t, s)
	root := filepath.Join(s.DataDir, "agent")
	t.Cleanup(func() { agent.KillPods(root) })
	s.Start()
	tb := &tokenBed{t: t, s: s, c: s.Client(), root: root, client: filepath.Join(t.TempDir(), "inclusterclient")}
	build := exec.Command("go", "build", "-o", tb.client, "./testdata/inclusterclient")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build the in-cluster client: %v\n%s", err, out)
	}
	return tb
}

// runClient runs the in-cluster client in a pod of namespace ns and
// returns its output once it has finished.
func (tb *tokenBed) runClient(ns, name string, edit func(*corev1.Pod)) string {
	tb.t.Helper()
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}, Spec: corev1.PodSpec{
		NodeName: "node1", RestartPolicy: corev1.RestartPolicyNever,
		Containers: []corev1.Container{{Name: "main", Image: "client", Command: []string{tb.client}}},
	}}
	if edit != nil {
		edit(pod)
	}
	if _, err := tb.c.CoreV1().Pods(ns).Create(context.Background(), pod, metav1.CreateOptions{}); err != nil {
		tb.t.Fatalf("create pod %s: %v", name, err)
	}
	var out string
	eventuallyWithin(tb.t, 90*time.Second, "pod "+name+" finished", func() (bool, string) {
		p, err := tb.c.CoreV1().Pods(ns).Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		if p.Status.Phase != corev1.PodSucceeded && p.Status.Phase != corev1.PodFailed {
			return false, string(p.Status.Phase)
		}
		out, _ = tb.s.Kubectl("logs", "-n", ns, name)
		return out != "", "no output yet"
	})
	return strings.TrimSpace(out)
}

// TestServiceAccountInClusterClient: a client-go program in a pod uses
// rest.InClusterConfig() with the token, CA and namespace the agent
// mounts, and lists the Services of its namespace once a RoleBinding lets
// its ServiceAccount; before, the API answers 403.
func TestServiceAccountInClusterClient(t *testing.T) {
	tb := newTokenBed(t)
	ctx := context.Background()
	if _, err := tb.c.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "team"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	t.Run("account without a binding gets 403", func(t *testing.T) {
		out := tb.runClient("team", "refused", nil)
		want := `LIST-ERROR 403 services is forbidden: User "system:serviceaccount:team:default" cannot list resource "services" in API group "" in the namespace "team"`
		if out != want {
			t.Fatalf("client: got %q, want %q", out, want)
		}
	})
	t.Run("account with a RoleBinding lists services", func(t *testing.T) {
		tb.s.MustKubectl("create", "rolebinding", "default-view", "-n", "team", "--clusterrole", "view", "--serviceaccount", "team:default")
		if out := tb.runClient("team", "lister", nil); !strings.HasPrefix(out, "LIST-OK") {
			t.Fatalf("client: got %q, want LIST-OK", out)
		}
	})
	t.Run("pod spec reads as upstream's", func(t *testing.T) {
		p, err := tb.c.CoreV1().Pods("team").Get(ctx, "lister", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if p.Spec.ServiceAccountName != "default" {
			t.Errorf("serviceAccountName: got %q, want default", p.Spec.ServiceAccountName)
		}
		if len(p.Spec.Volumes) != 1 || !strings.HasPrefix(p.Spec.Volumes[0].Name, "kube-api-access-") || p.Spec.Volumes[0].Projected == nil {
			t.Errorf("volumes: got %+v, want one projected kube-api-access-XXXXX", p.Spec.Volumes)
		}
		mounts := p.Spec.Containers[0].VolumeMounts
		if len(mounts) != 1 || mounts[0].MountPath != "/var/run/secrets/kubernetes.io/serviceaccount" || !mounts[0].ReadOnly {
			t.Errorf("mounts: got %+v, want the token read-only at /var/run/secrets/kubernetes.io/serviceaccount", mounts)
		}
	})
	t.Run("automountServiceAccountToken false", func(t *testing.T) {
		out := tb.runClient("team", "no-token", func(p *corev1.Pod) { p.Spec.AutomountServiceAccountToken = ptr.To(false) })
		if !strings.HasPrefix(out, "CONFIG-ERROR") {
			t.Fatalf("client: got %q, want CONFIG-ERROR (no token mounted)", out)
		}
	})
	t.Run("missing account refused", func(t *testing.T) {
		_, err := tb.c.CoreV1().Pods("team").Create(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "ghost"}, Spec: corev1.PodSpec{
			ServiceAccountName: "ghost", Containers: []corev1.Container{{Name: "main", Image: "x", Command: []string{"true"}}}}}, metav1.CreateOptions{})
		want := `pods "ghost" is forbidden: error looking up service account team/ghost: serviceaccount "ghost" not found`
		if !apierrors.IsForbidden(err) || err.Error() != want {
			t.Fatalf("got %v, want 403 %q", err, want)
		}
	})
	t.Run("token directory goes with the pod", func(t *testing.T) {
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "sleeper"}, Spec: corev1.PodSpec{NodeName: "node1",
			Containers: []corev1.Container{{Name: "main", Image: "x", Command: []string{"sleep", "1000"}}}}}
		pod, err := tb.c.CoreV1().Pods("team").Create(ctx, pod, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		dir := filepath.Join(tb.root, "pods", string(pod.UID), "volumes", pod.Spec.Volumes[0].Name)
		eventuallyWithin(t, 60*time.Second, "token files written", func() (bool, string) {
			for _, f := range []string{"token", "ca.crt", "namespace"} {
				if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
					return false, err.Error()
				}
			}
			return true, ""
		})
		if err := tb.c.CoreV1().Pods("team").Delete(ctx, "sleeper", metav1.DeleteOptions{GracePeriodSeconds: ptr.To(int64(0))}); err != nil {
			t.Fatal(err)
		}
		waitFor(t, 30*time.Second, func() bool { _, err := os.Stat(dir); return errors.Is(err, os.ErrNotExist) })
	})
}

// TestServiceAccountTokenBadInput: tokens that must not authenticate get
// 401, never a 500, and the server's log never holds them. Valid tokens
// read the OIDC key set, which RBAC grants every ServiceAccount.
func TestServiceAccountTokenBadInput(t *testing.T) {
	s := framework.StartServer(t)
	c := s.Client()
	ctx := context.Background()
	if _, err := c.CoreV1().ServiceAccounts("default").Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "app"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "holder"}, Spec: corev1.PodSpec{ServiceAccountName: "app",
		Containers: []corev1.Container{{Name: "main", Image: "x", Command: []string{"sleep", "1000"}}}}}
	pod, err := c.CoreV1().Pods("default").Create(ctx, pod, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	request := func(name string, ref *authenticationv1.BoundObjectReference) string {
		t.Helper()
		tr, err := c.CoreV1().ServiceAccounts("default").CreateToken(ctx, name, &authenticationv1.TokenRequest{
			Spec: authenticationv1.TokenRequestSpec{BoundObjectRef: ref}}, metav1.CreateOptions{})
		if err != nil {
			t.Fatalf("token for %s: %v", name, err)
		}
		return tr.Status.Token
	}
	t.Run("kubectl create token", func(t *testing.T) {
		tok := strings.TrimSpace(s.MustKubectl("create", "token", "app", "--duration", "10m"))
		if strings.Count(tok, ".") != 2 {
			t.Fatalf("got %q, want a JWT", tok)
		}
		if code := tokenStatus(t, s, tok); code != 200 {
			t.Fatalf("a token from kubectl create token: got %d, want 200", code)
		}
	})
	t.Run("bad requests", func(t *testing.T) { tokenBadRequests(t, s) })
	podToken := request("app", &authenticationv1.BoundObjectReference{Kind: "Pod", APIVersion: "v1", Name: "holder", UID: pod.UID})
	accountToken := request("app", nil)
	if code := tokenStatus(t, s, podToken); code != 200 {
		t.Fatalf("a fresh pod-bound token: got %d, want 200", code)
	}

	expired, otherKey := forgedTokens(t, s, "app")

	if err := c.CoreV1().Pods("default").Delete(ctx, "holder", metav1.DeleteOptions{GracePeriodSeconds: ptr.To(int64(0))}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "token of the deleted pod refused", func() (bool, string) {
		code := tokenStatus(t, s, podToken)
		return code == 401, fmt.Sprint(code)
	})
	if code := tokenStatus(t, s, accountToken); code != 200 {
		t.Fatalf("account token while the account exists: got %d, want 200", code)
	}
	if err := c.CoreV1().ServiceAccounts("default").Delete(ctx, "app", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "token of the deleted account refused", func() (bool, string) {
		code := tokenStatus(t, s, accountToken)
		return code == 401, fmt.Sprint(code)
	})

	for _, tc := range []struct{ name, token string }{
		{"malformed", "eyJhbGciOiJSUzI1NiJ9.not-base64!.x"},
		{"garbage", "a.b.c"},
		{"expired", expired},
		{"signed by another key", otherKey},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if code := tokenStatus(t, s, tc.token); code != 401 {
				t.Fatalf("got %d, want 401", code)
			}
		})
	}
	log, err := os.ReadFile(filepath.Join(s.DataDir, "portal.log"))
	if err != nil {
		t.Fatal(err)
	}
	for name, tok := range map[string]string{"pod": podToken, "account": accountToken, "expired": expired, "other key": otherKey} {
		sig := tok[strings.LastIndex(tok, ".")+1:]
		if strings.Contains(string(log), sig) {
			t.Errorf("the server log holds the %s token", name)
		}
	}
}

// tokenStatus is the HTTP status of a GET of the OIDC key set with token:
// RBAC's bootstrap policy lets every ServiceAccount read it, so a token
// that authenticates gets 200 whatever else its account may do.
func tokenStatus(t *testing.T, s *framework.Server, token string) int {
	t.Helper()
	admin := s.RESTConfig()
	cfg := &rest.Config{Host: admin.Host, BearerToken: token, Dial: admin.Dial,
		TLSClientConfig: rest.TLSClientConfig{CAData: admin.CAData, CAFile: admin.CAFile}}
	c, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	var code int
	res := c.CoreV1().RESTClient().Get().AbsPath("/openid/v1/jwks").Do(context.Background()).StatusCode(&code)
	if code == 0 {
		t.Fatalf("GET /openid/v1/jwks with a token: %v", res.Error())
	}
	return code
}

// forgeToken signs, with key, a token for sa issued at issued that lives
// an hour.
func forgeToken(t *testing.T, key any, sa *corev1.ServiceAccount, issued time.Time) string {
	t.Helper()
	signer, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.RS256, Key: key}, nil)
	if err != nil {
		t.Fatal(err)
	}
	iss := "https://kubernetes.default.svc.cluster.local"
	claims := jwt.Claims{Issuer: iss, Subject: "system:serviceaccount:default:" + sa.Name, Audience: jwt.Audience{iss},
		IssuedAt: jwt.NewNumericDate(issued), NotBefore: jwt.NewNumericDate(issued), Expiry: jwt.NewNumericDate(issued.Add(time.Hour))}
	private := map[string]any{"kubernetes.io": map[string]any{"namespace": "default",
		"serviceaccount": map[string]any{"name": sa.Name, "uid": string(sa.UID)}}}
	tok, err := jwt.Signed(signer).Claims(claims).Claims(private).Serialize()
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// tokenBadRequests: kubectl create token with a duration too short, a
// missing or recreated pod, or a pod of another account is refused with
// upstream's message; a token bound to the account's pod is issued.
func tokenBadRequests(t *testing.T, s *framework.Server) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--duration", "5m"}, "may not specify a duration less than 10 minutes"},
		{[]string{"--bound-object-kind", "Pod", "--bound-object-name", "nope"}, `pods "nope" not found`},
		{[]string{"--bound-object-kind", "Pod", "--bound-object-name", "holder", "--bound-object-uid", "wrong"},
			"the UID in the bound object reference (wrong) does not match the UID in record"},
		{[]string{"--bound-object-kind", "Pod", "--bound-object-name", "holder"}, ""},
	} {
		out, err := s.Kubectl(append([]string{"create", "token", "app"}, tc.args...)...)
		if tc.want == "" {
			if err != nil {
				t.Errorf("%v: %v\n%s", tc.args, err, out)
			}
			continue
		}
		if err == nil || !strings.Contains(out, tc.want) {
			t.Errorf("%v: got %v\n%s\nwant an error saying %q", tc.args, err, out, tc.want)
		}
	}
	out, err := s.Kubectl("create", "token", "default", "--bound-object-kind", "Pod", "--bound-object-name", "holder")
	if want := `cannot bind token for serviceaccount "default" to pod running with different serviceaccount name.`; err == nil || !strings.Contains(out, want) {
		t.Errorf("token of another account bound to the pod: got %v\n%s\nwant %q", err, out, want)
	}
}

// forgedTokens returns two tokens of ServiceAccount default/name the
// server must refuse: one signed with its key but expired, and a current
// one signed with another key.
func forgedTokens(t *testing.T, s *framework.Server, name string) (expired, otherKey string) {
	key, err := keyutil.PrivateKeyFromFile(filepath.Join(s.DataDir, "pki", "sa.key"))
	if err != nil {
		t.Fatal(err)
	}
	other, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	sa, err := s.Client().CoreV1().ServiceAccounts("default").Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return forgeToken(t, key, sa, time.Now().Add(-2*time.Hour)), forgeToken(t, other, sa, time.Now())
}
