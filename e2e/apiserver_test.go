package e2e

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/clientcmd"

	"portal.dev/portal/e2e/framework"
)

func service(name string) *corev1.Service {
	return &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: corev1.ServiceSpec{
			Selector: map[string]string{"app": name},
			Ports:    []corev1.ServicePort{{Name: "http", Port: 80, Protocol: corev1.ProtocolTCP}},
		},
	}
}

// TestInformerAcrossRestart: an informer started before the server restarts
// sees every change made before, during recovery and after.
func TestInformerAcrossRestart(t *testing.T) {
	s := framework.StartServer(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	client := s.Client()
	svcs := client.CoreV1().Services("default")

	var mu sync.Mutex
	seen := map[string]string{} // name -> last event
	factory := informers.NewSharedInformerFactoryWithOptions(client, 0, informers.WithNamespace("default"))
	inf := factory.Core().V1().Services().Informer()
	record := func(ev string) func(obj any) {
		return func(obj any) {
			if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = d.Obj
			}
			mu.Lock()
			seen[obj.(*corev1.Service).Name] = ev
			mu.Unlock()
		}
	}
	inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    record("add"),
		UpdateFunc: func(_, obj any) { record("update")(obj) },
		DeleteFunc: record("delete"),
	})
	factory.Start(ctx.Done())
	cache.WaitForCacheSync(ctx.Done(), inf.HasSynced)

	for i := range 5 {
		if _, err := svcs.Create(ctx, service(fmt.Sprintf("before-%d", i)), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	s.Stop()
	s.Start()
	// Changes right after the restart, while the informer reconnects.
	for i := range 5 {
		if _, err := svcs.Create(ctx, service(fmt.Sprintf("after-%d", i)), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if err := svcs.Delete(ctx, "before-0", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	patch := []byte(`{"metadata":{"labels":{"changed":"yes"}}}`)
	if _, err := svcs.Patch(ctx, "before-1", "application/merge-patch+json", patch, metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}

	want := map[string]string{"before-0": "delete", "before-1": "update", "kubernetes": "add"}
	for i := 2; i < 5; i++ {
		want[fmt.Sprintf("before-%d", i)] = "add"
	}
	for i := range 5 {
		want[fmt.Sprintf("after-%d", i)] = "add"
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		mu.Lock()
		var missing []string
		for name, ev := range want {
			// After a restart the informer may relist, which reports
			// objects it knew as updates: for an unchanged object either
			// event means it was seen.
			if ev == "add" && seen[name] == "update" {
				continue
			}
			if seen[name] != ev {
				missing = append(missing, fmt.Sprintf("%s: got %q, want %q", name, seen[name], ev))
			}
		}
		mu.Unlock()
		if len(missing) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("informer missed events:\n%s", strings.Join(missing, "\n"))
		}
		time.Sleep(100 * time.Millisecond)
	}
	// The informer's store must equal what the server lists.
	list, err := svcs.List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := len(inf.GetStore().ListKeys()), len(list.Items); got != want {
		t.Fatalf("informer store has %d services, server lists %d", got, want)
	}
}

// TestKill9LosesNoAcknowledgedWrite: six clients create Services while the
// server is killed with SIGKILL; every create that was answered with
// success exists after restart.
func TestKill9LosesNoAcknowledgedWrite(t *testing.T) {
	s := framework.StartServer(t)
	cfg := s.RESTConfig()
	cfg.Timeout = 5 * time.Second
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var acked []string
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for w := range 6 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				name := fmt.Sprintf("w%d-%d", w, i)
				_, err := client.CoreV1().Services("default").Create(context.Background(), service(name), metav1.CreateOptions{})
				if err == nil {
					mu.Lock()
					acked = append(acked, name)
					mu.Unlock()
				} else if i > 10000 {
					return
				}
			}
		}()
	}
	waitFor(t, 30*time.Second, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(acked) >= 200
	})
	s.Kill()
	close(stop)
	wg.Wait()
	s.Start()
	list, err := s.Client().CoreV1().Services("default").List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	have := map[string]bool{}
	for _, svc := range list.Items {
		have[svc.Name] = true
	}
	var lost []string
	for _, name := range acked {
		if !have[name] {
			lost = append(lost, name)
		}
	}
	if len(lost) > 0 {
		t.Fatalf("%d of %d acknowledged creates lost after kill -9: %v", len(lost), len(acked), lost)
	}
	t.Logf("%d acknowledged creates, all present after kill -9 and restart", len(acked))
}

func insecureClient() *http.Client {
	return &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
}

// TestAuthentication: anonymous and wrong credentials get 401 on resources;
// the health and version endpoints stay readable.
func TestAuthentication(t *testing.T) {
	s := framework.StartServer(t)
	c := insecureClient()
	get := func(path, token string) int {
		t.Helper()
		req, _ := http.NewRequest(http.MethodGet, s.URL()+path, nil)
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode
	}
	for _, tc := range []struct {
		name, path, token string
		want              int
	}{
		{"anonymous list services", "/api/v1/services", "", 401},
		{"anonymous discovery", "/api", "", 401},
		{"anonymous openapi", "/openapi/v2", "", 401},
		{"anonymous metrics", "/metrics", "", 401},
		{"wrong token", "/api/v1/namespaces", "not-a-token", 401},
		{"wrong token on readyz", "/readyz", "not-a-token", 401},
		{"anonymous healthz", "/healthz", "", 200},
		{"anonymous livez", "/livez", "", 200},
		{"anonymous readyz", "/readyz", "", 200},
		{"anonymous version", "/version", "", 200},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := get(tc.path, tc.token); got != tc.want {
				t.Fatalf("GET %s: got %d, want %d", tc.path, got, tc.want)
			}
		})
	}
	// An anonymous write is refused too.
	resp, err := c.Post(s.URL()+"/api/v1/namespaces", "application/json", strings.NewReader(`{"metadata":{"name":"x"}}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 401 {
		t.Fatalf("anonymous POST: got %d, want 401", resp.StatusCode)
	}

	t.Run("minted certificate and token work", func(t *testing.T) {
		// bob is an ordinary user: like a real one, he is bound a role
		// that lets him list namespaces.
		s.MustKubectl("create", "clusterrole", "namespace-reader", "--verb", "list", "--resource", "namespaces")
		s.MustKubectl("create", "clusterrolebinding", "bob-namespaces", "--clusterrole", "namespace-reader", "--user", "bob")
		for _, mode := range [][]string{{}, {"--token"}} {
			kc := filepath.Join(t.TempDir(), "kc")
			args := append([]string{"kubeconfig", "--data-dir", s.DataDir, "--user", "bob", "--server", s.URL(), "-o", kc}, mode...)
			if out, err := exec.Command(framework.Binary(t), args...).CombinedOutput(); err != nil {
				t.Fatalf("portal kubeconfig %v: %v\n%s", mode, err, out)
			}
			if st, _ := os.Stat(kc); st.Mode().Perm() != 0o600 {
				t.Fatalf("kubeconfig mode: got %o, want 600", st.Mode().Perm())
			}
			cfg, err := clientcmd.BuildConfigFromFlags("", kc)
			if err != nil {
				t.Fatal(err)
			}
			client := kubernetes.NewForConfigOrDie(cfg)
			// The binding reaches the authorizer's cache a moment after
			// it is written.
			eventually(t, "bob listing namespaces", func() (bool, string) {
				_, err := client.CoreV1().Namespaces().List(context.Background(), metav1.ListOptions{})
				return err == nil, fmt.Sprintf("minted %v credential: %v", mode, err)
			})
		}
	})
	t.Run("admin kubeconfig is private", func(t *testing.T) {
		st, err := os.Stat(s.Kubeconfig())
		if err != nil {
			t.Fatal(err)
		}
		if st.Mode().Perm() != 0o600 {
			t.Fatalf("admin.kubeconfig mode: got %o, want 600", st.Mode().Perm())
		}
	})
	t.Run("no key material in the log", func(t *testing.T) {
		log, _ := os.ReadFile(filepath.Join(s.DataDir, "portal.log"))
		for _, secret := range []string{"PRIVATE KEY", "BEGIN CERTIFICATE"} {
			if bytes.Contains(log, []byte(secret)) {
				t.Fatalf("log contains %q", secret)
			}
		}
	})
}

// TestBadInput: malformed, unknown, oversized and invalid input gets a 4xx
// that names the problem, never a 5xx.
func TestBadInput(t *testing.T) {
	s := framework.StartServer(t)
	client := s.Client()
	rc := client.CoreV1().RESTClient()
	post := func(body []byte, contentType string, params map[string]string) (int, string) {
		t.Helper()
		req := rc.Post().AbsPath("/api/v1/namespaces/default/services").Body(body).SetHeader("Content-Type", contentType)
		for k, v := range params {
			req = req.Param(k, v)
		}
		res := req.Do(context.Background())
		var code int
		res.StatusCode(&code)
		raw, _ := res.Raw()
		return code, string(raw)
	}
	big := bytes.Repeat([]byte("a"), 4<<20)
	for _, tc := range []struct {
		name        string
		body        string
		contentType string
		params      map[string]string
		wantCode    int
		wantText    string
	}{
		{"malformed json", `{"metadata":`, "application/json", nil, 400, "unexpected end of JSON input"},
		{"malformed yaml", "metadata: [", "application/yaml", nil, 400, ""},
		{"unknown field strict", `{"apiVersion":"v1","kind":"Service","metadata":{"name":"u"},"spec":{"bogus":1,"ports":[{"port":80}]}}`,
			"application/json", map[string]string{"fieldValidation": "Strict"}, 400, `unknown field \"spec.bogus\"`},
		{"oversized body", `{"metadata":{"name":"big","annotations":{"a":"` + string(big) + `"}}}`, "application/json", nil, 413, ""},
		{"bad name", `{"apiVersion":"v1","kind":"Service","metadata":{"name":"Bad_Name"},"spec":{"ports":[{"port":80}]}}`,
			"application/json", nil, 422, "metadata.name"},
		{"name too long", `{"apiVersion":"v1","kind":"Service","metadata":{"name":"` + strings.Repeat("a", 64) + `"},"spec":{"ports":[{"port":80}]}}`,
			"application/json", nil, 422, "must be no more than 63 characters"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, body := post([]byte(tc.body), tc.contentType, tc.params)
			if code != tc.wantCode {
				t.Fatalf("got %d, want %d; body %.300s", code, tc.wantCode, body)
			}
			if !strings.Contains(body, tc.wantText) {
				t.Fatalf("body %.300s does not name %q", body, tc.wantText)
			}
		})
	}
	t.Run("422 carries causes", func(t *testing.T) {
		_, err := client.CoreV1().Services("default").Create(context.Background(), service("Bad_Name"), metav1.CreateOptions{})
		status, ok := err.(apierrors.APIStatus)
		if !ok || status.Status().Code != 422 {
			t.Fatalf("got %v, want a 422", err)
		}
		details := status.Status().Details
		if details == nil || len(details.Causes) == 0 || details.Causes[0].Field != "metadata.name" {
			out, _ := json.Marshal(status.Status())
			t.Fatalf("causes: got %s, want field metadata.name", out)
		}
	})
}

// TestAPIServersShareEtcd: two API servers on one etcd serve the same data;
// a watch on one sees a write on the other.
func TestAPIServersShareEtcd(t *testing.T) {
	a := framework.StartServer(t)
	pkiA := filepath.Join(a.DataDir, "pki")
	b := &framework.Server{Command: "apiserver", DataDir: t.TempDir(), Port: framework.FreePort(t)}
	os.MkdirAll(filepath.Join(b.DataDir, "pki"), 0o700)
	for _, f := range []string{"ca.crt", "ca.key"} {
		data, err := os.ReadFile(filepath.Join(pkiA, f))
		if err != nil {
			t.Fatal(err)
		}
		os.WriteFile(filepath.Join(b.DataDir, "pki", f), data, 0o600)
	}
	ports, err := os.ReadFile(filepath.Join(a.DataDir, "etcd-ports"))
	if err != nil {
		t.Fatal(err)
	}
	etcdURL := "https://127.0.0.1:" + strings.Fields(string(ports))[0]
	b.Args = []string{"--etcd-servers", etcdURL,
		"--etcd-cafile", filepath.Join(pkiA, "etcd", "ca.crt"),
		"--etcd-certfile", filepath.Join(pkiA, "etcd", "apiserver-client.crt"),
		"--etcd-keyfile", filepath.Join(pkiA, "etcd", "apiserver-client.key")}
	framework.Attach(t, b)
	b.Start()

	ctx := context.Background()
	// Only the test's own ConfigMap: the namespace also holds the
	// controller manager's kube-root-ca.crt.
	w, err := b.Client().CoreV1().ConfigMaps("default").Watch(ctx, metav1.ListOptions{FieldSelector: "metadata.name=shared"})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "shared"}, Data: map[string]string{"k": "v"}}
	if _, err := a.Client().CoreV1().ConfigMaps("default").Create(ctx, cm, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	select {
	case ev := <-w.ResultChan():
		if got := ev.Object.(*corev1.ConfigMap).Name; got != "shared" {
			t.Fatalf("watch on B: got %s, want shared", got)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("watch on B saw nothing of a write on A")
	}
	got, err := b.Client().CoreV1().ConfigMaps("default").Get(ctx, "shared", metav1.GetOptions{})
	if err != nil || got.Data["k"] != "v" {
		t.Fatalf("get on B: %v %v", got, err)
	}
	// Both announce themselves and agree on the kubernetes endpoints
	// instead of overwriting each other: after a settling period the port
	// stays the same across more than one reconcile period (10 s) of each.
	waitFor(t, 20*time.Second, func() bool {
		leases, err := b.Client().CoordinationV1().Leases("kube-system").List(ctx, metav1.ListOptions{LabelSelector: "portal.dev/apiserver"})
		return err == nil && len(leases.Items) == 2
	})
	slicePort := func() int32 {
		slice, err := b.Client().DiscoveryV1().EndpointSlices("default").Get(ctx, "kubernetes", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return *slice.Ports[0].Port
	}
	time.Sleep(11 * time.Second)
	settled := slicePort()
	for end := time.Now().Add(12 * time.Second); time.Now().Before(end); time.Sleep(200 * time.Millisecond) {
		if got := slicePort(); got != settled || (got != int32(a.Port) && got != int32(b.Port)) {
			leases, _ := b.Client().CoordinationV1().Leases("kube-system").List(ctx, metav1.ListOptions{})
			for _, l := range leases.Items {
				t.Logf("lease %s created %v renewed %v annotations %v", l.Name, l.CreationTimestamp, l.Spec.RenewTime, l.Annotations)
			}
			t.Fatalf("kubernetes endpoint port changed from %d to %d (A on %d, B on %d)", settled, got, a.Port, b.Port)
		}
	}
	if settled != int32(a.Port) {
		t.Logf("note: settled on B's port %d, not the older A's %d", settled, a.Port)
	}

	// Concurrent creates on both servers never share an address or port.
	var wg sync.WaitGroup
	for i, srv := range []*framework.Server{a, b} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			createConcurrently(srv.Client(), fmt.Sprintf("via%d", i), 25)
		}()
	}
	wg.Wait()
	if held := wantedReservations(t, a.Client()); len(held) != 101 {
		t.Fatalf("50 NodePort services and kubernetes hold %d distinct items, want 101", len(held))
	}

	// Optimistic concurrency holds across servers.
	stale := got.DeepCopy()
	got.Data["k"] = "v2"
	if _, err := a.Client().CoreV1().ConfigMaps("default").Update(ctx, got, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	stale.Data["k"] = "v3"
	if _, err := b.Client().CoreV1().ConfigMaps("default").Update(ctx, stale, metav1.UpdateOptions{}); !apierrors.IsConflict(err) {
		t.Fatalf("stale update on B: got %v, want 409 Conflict", err)
	}
}
