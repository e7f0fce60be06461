package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"portal.dev/portal/agent"
	"portal.dev/portal/e2e/framework"
	"portal.dev/portal/e2e/testbed"
	"portal.dev/portal/explain"
)

// explainBed is two nodes as in TestSeedsScenario: node1 runs `portal
// server` with everything (API, controllers, DNS, proxy, agent, the
// Ingress controller on ports 80 and 443 of its network namespace), node2
// runs `portal proxy` and `portal agent`. LoadBalancer pools serve IPv6
// only, so an IPv4 LoadBalancer Service finds no pool.
type explainBed struct {
	t      *testing.T
	s      *framework.Server
	c      kubernetes.Interface
	node1  *testbed.NS
	node2  *testbed.NS
	proxy2 *exec.Cmd
	www    string
}

// newExplainBed runs node1's `portal server` with its Ingress controller,
// which explain's Ingress step sends its requests through.
func newExplainBed(t *testing.T) *explainBed {
	return newTwoNodeBed(t)
}

// newTwoNodeBed starts the bed with more arguments to node1's `portal
// server`.
func newTwoNodeBed(t *testing.T, serverArgs ...string) *explainBed {
	if _, err := exec.LookPath("python3"); err != nil {
		t.Skip("needs python3 on the node (./hack/deps.sh installs it)")
	}
	b := testbed.New(t)
	eb := &explainBed{t: t, node1: b.Namespace("x1"), node2: b.Namespace("x2"), www: t.TempDir()}
	b.Link(eb.node1, "10.100.1.1/24", eb.node2, "10.100.1.2/24")
	eb.node1.MustRun("ip", "route", "add", "default", "via", "10.100.1.2")
	eb.node2.MustRun("ip", "route", "add", "default", "via", "10.100.1.1")
	eb.s = &framework.Server{Command: "server", DataDir: t.TempDir(), Port: 6443,
		Args: []string{"--bind-address", "0.0.0.0", "--advertise-address", "10.100.1.1",
			"--hostname-override", "node1", "--node-ip", "10.100.1.1", "--node-monitor-grace-period", "1h",
			"--loadbalancer-ip-pools", "fd00:99::/120"},
		Wrap: []string{"ip", "netns", "exec", eb.node1.Name},
		Dial: eb.node1.DialContext,
	}
	eb.s.Args = append(eb.s.Args, serverArgs...)
	framework.Attach(t, eb.s)
	t.Cleanup(func() { agent.KillPods(filepath.Join(eb.s.DataDir, "agent")) })
	eb.s.Start()
	eb.c = eb.s.Client()

	logs := t.TempDir()
	root2 := filepath.Join(t.TempDir(), "agent2")
	t.Cleanup(func() { agent.KillPods(root2) })
	proxyLog, _ := os.Create(filepath.Join(logs, "proxy2.log"))
	eb.proxy2 = eb.node2.Start(proxyLog, framework.Binary(t), "proxy", "--hostname-override", "node2", "--cluster-cidr", "10.244.0.0/16",
		"--kubeconfig", eb.s.UserKubeconfig(t, "system:kube-proxy", "https://10.100.1.1:6443"))
	agentLog, _ := os.Create(filepath.Join(logs, "agent2.log"))
	eb.node2.Start(agentLog, framework.Binary(t), "agent", "--hostname-override", "node2", "--node-ip", "10.100.1.2",
		"--cluster-cidr", "10.244.0.0/16", "--root-dir", root2,
		"--kubeconfig", eb.s.UserKubeconfig(t, "system:node:node2", "https://10.100.1.1:6443"))
	logAgentOnFailure(t, "node2's agent log", agentLog.Name(), 40)
	logAgentOnFailure(t, "node2's proxy log", proxyLog.Name(), 40)
	return eb
}

// explain runs `portal explain -o json` on node1 and returns the report
// and the exit status.
func (eb *explainBed) explain(kubeconfig string, args ...string) (*explain.Report, int, string) {
	eb.t.Helper()
	if kubeconfig == "" {
		kubeconfig = eb.s.Kubeconfig()
	}
	full := append([]string{"netns", "exec", eb.node1.Name, framework.Binary(eb.t), "explain", "--kubeconfig", kubeconfig, "-o", "json"}, args...)
	var stdout, stderr bytes.Buffer
	cmd := exec.Command("ip", full...)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	code := 0
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		code = ee.ExitCode()
	} else if err != nil {
		eb.t.Fatalf("portal explain %v: %v", args, err)
	}
	var r explain.Report
	if err := json.Unmarshal(stdout.Bytes(), &r); err != nil {
		return nil, code, fmt.Sprintf("exit %d, not a report: %v\nstdout: %s\nstderr: %s", code, err, stdout.String(), stderr.String())
	}
	return &r, code, stdout.String()
}

// expectStep waits until explaining args reports step (a name, or a
// name prefix ending in "/") with status and a message containing want.
func (eb *explainBed) expectStep(t *testing.T, kubeconfig string, args []string, step string, status explain.Status, want string) *explain.Report {
	t.Helper()
	var got *explain.Report
	eventuallyWithin(t, 45*time.Second, fmt.Sprintf("explain %v: step %s %s with %q", args, step, status, want), func() (bool, string) {
		r, code, out := eb.explain(kubeconfig, args...)
		if r == nil {
			return false, out
		}
		got = r
		for _, s := range r.Steps {
			if (s.Name == step || (strings.HasSuffix(step, "/") && strings.HasPrefix(s.Name, step))) && s.Status == status && strings.Contains(s.Message, want) {
				wantCode := 0
				if r.Status == explain.StatusBroken {
					wantCode = 1
				}
				return code == wantCode, fmt.Sprintf("exit %d for a %s report", code, r.Status)
			}
		}
		return false, out
	})
	return got
}

// listener is a pod serving HTTP on a named container port 8080, ready
// once the port accepts.
func (eb *explainBed) listener(name, node string, labels map[string]string) *corev1.Pod {
	dir := filepath.Join(eb.www, name)
	os.MkdirAll(dir, 0o755)
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}, Spec: corev1.PodSpec{
		NodeName: node, TerminationGracePeriodSeconds: ptr.To[int64](1),
		Containers: []corev1.Container{{Name: "web", Image: "python:3", WorkingDir: dir,
			Command: []string{"python3", "-m", "http.server", "8080"},
			Ports:   []corev1.ContainerPort{{Name: "http", ContainerPort: 8080}},
			ReadinessProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{Port: intstr.FromInt32(8080)}},
				PeriodSeconds: 1}}}}}
}

func (eb *explainBed) create(objs ...any) {
	eb.t.Helper()
	ctx := context.Background()
	for _, o := range objs {
		var err error
		switch o := o.(type) {
		case *corev1.Pod:
			_, err = eb.c.CoreV1().Pods("default").Create(ctx, o, metav1.CreateOptions{})
		case *corev1.Service:
			_, err = eb.c.CoreV1().Services("default").Create(ctx, o, metav1.CreateOptions{})
		case *networkingv1.Ingress:
			_, err = eb.c.NetworkingV1().Ingresses("default").Create(ctx, o, metav1.CreateOptions{})
		case *corev1.Namespace:
			_, err = eb.c.CoreV1().Namespaces().Create(ctx, o, metav1.CreateOptions{})
		default:
			eb.t.Fatalf("create %T: not handled", o)
		}
		if err != nil {
			eb.t.Fatalf("create %T: %v", o, err)
		}
	}
}

func selectorService(name string, selector map[string]string, target intstr.IntOrString) *corev1.Service {
	return &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: corev1.ServiceSpec{Selector: selector,
		Ports: []corev1.ServicePort{{Name: "http", Port: 80, TargetPort: target}}}}
}

// TestExplain makes ten broken set-ups and a healthy one on a real
// two-node bed and checks that portal explain names the broken step and
// its cause, and says ok at every step of the healthy one.
func TestExplain(t *testing.T) {
	eb := newExplainBed(t)
	web := map[string]string{"app": "web"}
	eb.create(
		eb.listener("web-1", "node1", web), eb.listener("web-2", "node2", web),
		selectorService("web", web, intstr.FromString("http")),
		// 1. A selector that matches nothing: one letter off.
		selectorService("typo", map[string]string{"app": "wbe"}, intstr.FromString("http")),
		// 2. A targetPort name no container has.
		selectorService("badname", web, intstr.FromString("htpp")),
		// 3. A port nobody listens on: the pod declares 9090 and serves 8080.
		selectorService("deaf", web, intstr.FromInt32(9090)),
		// 4. Every pod failing readiness; the probe's output carries
		// terminal escapes, which must come out escaped.
		&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "sick", Labels: map[string]string{"app": "sick"}}, Spec: corev1.PodSpec{
			NodeName: "node1", TerminationGracePeriodSeconds: ptr.To[int64](1),
			Containers: []corev1.Container{{Name: "main", Image: "debian", Command: []string{"sleep", "3600"},
				ReadinessProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{Exec: &corev1.ExecAction{
					Command: []string{"sh", "-c", `printf 'disk \033[31mfull\033[0m\n'; exit 1`}}}, PeriodSeconds: 1}}}}},
		selectorService("sick", map[string]string{"app": "sick"}, intstr.FromInt32(8080)),
		// 6. A LoadBalancer Service of a family no pool serves.
		&corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "lb"}, Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer,
			Selector: web, Ports: []corev1.ServicePort{{Port: 80, TargetPort: intstr.FromInt32(8080)}}}},
		// 7. externalTrafficPolicy Local, its only pod on node1, hit on node2.
		eb.listener("solo", "node1", map[string]string{"app": "solo"}),
		&corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "local"}, Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeNodePort,
			ExternalTrafficPolicy: corev1.ServiceExternalTrafficPolicyLocal, Selector: map[string]string{"app": "solo"},
			Ports: []corev1.ServicePort{{Port: 80, TargetPort: intstr.FromInt32(8080), NodePort: 30480}}}},
		// 8. An ExternalName that does not resolve.
		&corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "ext"}, Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeExternalName,
			ExternalName: "nosuch.nowhere.svc.cluster.local"}},
		// 9. An Ingress sending traffic to a port typo does not have.
		&networkingv1.Ingress{ObjectMeta: metav1.ObjectMeta{Name: "site"}, Spec: networkingv1.IngressSpec{
			DefaultBackend: &networkingv1.IngressBackend{Service: &networkingv1.IngressServiceBackend{Name: "typo",
				Port: networkingv1.ServiceBackendPort{Number: 8080}}}}},
		// A healthy Ingress in front of web.
		&networkingv1.Ingress{ObjectMeta: metav1.ObjectMeta{Name: "shop"}, Spec: networkingv1.IngressSpec{
			Rules: []networkingv1.IngressRule{{Host: "web.example", IngressRuleValue: networkingv1.IngressRuleValue{HTTP: &networkingv1.HTTPIngressRuleValue{
				Paths: []networkingv1.HTTPIngressPath{{Path: "/", PathType: ptr.To(networkingv1.PathTypePrefix), Backend: networkingv1.IngressBackend{
					Service: &networkingv1.IngressServiceBackend{Name: "web", Port: networkingv1.ServiceBackendPort{Name: "http"}}}}}}}}}}},
		// 10. The namespace a user asks web in by mistake.
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "other"}},
	)

	t.Run("healthy Service ok at every step", func(t *testing.T) {
		var last string
		eventuallyWithin(t, 60*time.Second, "svc/web ok at every step, exit 0", func() (bool, string) {
			r, code, out := eb.explain("", "svc/web")
			last = out
			if r == nil || code != 0 {
				return false, out
			}
			names := map[string]bool{}
			for _, s := range r.Steps {
				names[strings.SplitN(s.Name, "/", 2)[0]] = true
				if s.Status != explain.StatusOK {
					return false, out
				}
			}
			for _, want := range []string{"service", "dns", "selector", "endpoints", "endpoint", "node", "latency", "ingress"} {
				if !names[want] {
					return false, "no step " + want + ": " + out
				}
			}
			// The Ingress in front of it was asked, through node1's
			// agent and Ingress controller, and answered.
			if !strings.Contains(out, "web.example/ (GET http://web.example/ from node1) answers 200 OK") {
				return false, "the Ingress shop was not answered 200 through node1: " + out
			}
			// The cluster DNS is asked through a node's agent, which
			// works from outside the cluster network too.
			if !strings.Contains(out, "(from node node1)") {
				return false, "the cluster DNS was not asked through node1's agent: " + out
			}
			return true, ""
		})
		t.Log(last)
	})
	t.Run("selector matching nothing names the nearest label", func(t *testing.T) {
		eb.expectStep(t, "", []string{"svc/typo"}, "selector", explain.StatusBroken, "label app=web, selector wants app=wbe")
	})
	t.Run("targetPort name no container has", func(t *testing.T) {
		eb.expectStep(t, "", []string{"svc/badname"}, "endpoints", explain.StatusBroken, `has a port named "htpp" (declared: http=8080)`)
	})
	t.Run("a port nobody listens on", func(t *testing.T) {
		eb.expectStep(t, "", []string{"svc/deaf"}, "endpoint/", explain.StatusBroken, ":9090: connection refused")
	})
	t.Run("every pod failing readiness shows the probe's message, escaped", func(t *testing.T) {
		eb.expectStep(t, "", []string{"svc/sick"}, "endpoints", explain.StatusBroken, `Readiness probe failed: command exited with 1: disk \x1b[31mfull`)
		out, _ := exec.Command("ip", "netns", "exec", eb.node1.Name, framework.Binary(t), "explain", "--kubeconfig", eb.s.Kubeconfig(), "svc/sick").Output()
		if bytes.IndexByte(out, 0x1b) >= 0 || !bytes.Contains(out, []byte(`\x1b[31m`)) {
			t.Errorf("the probe's escape sequence reached the terminal unescaped or not at all:\n%q", out)
		}
	})
	t.Run("a LoadBalancer with no pool", func(t *testing.T) {
		eb.expectStep(t, "", []string{"svc/lb"}, "loadbalancer", explain.StatusBroken, "no load balancer IP pool for the Service's IP families [IPv4] (NoPool)")
	})
	t.Run("externalTrafficPolicy Local hit on a node without local endpoints", func(t *testing.T) {
		eb.expectStep(t, "", []string{"10.100.1.2:30480"}, "node/node2", explain.StatusBroken, "externalTrafficPolicy Local and node2 has no local ready endpoint")
	})
	t.Run("an ExternalName that does not resolve", func(t *testing.T) {
		eb.expectStep(t, "", []string{"svc/ext"}, "dns", explain.StatusBroken, "externalName nosuch.nowhere.svc.cluster.local does not resolve (NXDOMAIN")
	})
	t.Run("an Ingress pointing at a missing Service port", func(t *testing.T) {
		// The controller is asked, and answers the default backend 503.
		r := eb.expectStep(t, "", []string{"ingress/site"}, "ingress/default/site", explain.StatusBroken,
			"default backend: Service typo has no port 8080 (its ports: http 80/TCP->http); the Ingress controller: default backend (GET http://127.0.0.1:80/ from node1) answers 503 Service Unavailable")
		if a := ingressAnswer(r, "ingress/default/site"); a == nil || a.Result == nil || a.Result.Status != 503 || a.Verdict != explain.StatusBroken {
			t.Errorf("-o json: got answer %+v, want a 503 judged broken", a)
		}
	})
	t.Run("a healthy Ingress answers 200", func(t *testing.T) {
		r := eb.expectStep(t, "", []string{"ingress/shop"}, "ingress/default/shop", explain.StatusOK,
			"1 route(s) to this Service: web.example/ (GET http://web.example/ from node1) answers 200 OK")
		if a := ingressAnswer(r, "ingress/default/shop"); a == nil || a.Result == nil || a.Result.Status != 200 || a.Rule != "web.example/" || a.Node != "node1" {
			t.Errorf("-o json: got answer %+v, want web.example/ answered 200 through node1", a)
		}
	})
	t.Run("a Service name asked in the wrong namespace", func(t *testing.T) {
		eb.expectStep(t, "", []string{"web.other"}, "dns", explain.StatusBroken, "web.other asked in the wrong namespace")
	})
	t.Run("bad input: a Service that does not exist suggests close names", func(t *testing.T) {
		eb.expectStep(t, "", []string{"svc/wbe"}, "service", explain.StatusBroken, "did you mean svc/web")
	})
	t.Run("bad input: no permission for a step says which", func(t *testing.T) {
		kc := eb.readOnlyUser(t)
		eb.expectStep(t, kc, []string{"svc/web"}, "node/node1", explain.StatusWarning, "no permission to get nodes/proxy of node1")
	})
	t.Run("bad input: a node that does not answer is said and skipped", func(t *testing.T) {
		ctx := context.Background()
		if _, err := eb.c.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "ghost"}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		defer eb.c.CoreV1().Nodes().Delete(ctx, "ghost", metav1.DeleteOptions{})
		// The node controllers write the new Node too: retry on conflict.
		eventually(t, "ghost's status written", func() (bool, string) {
			ghost, err := eb.c.CoreV1().Nodes().Get(ctx, "ghost", metav1.GetOptions{})
			if err != nil {
				return false, err.Error()
			}
			ghost.Status = corev1.NodeStatus{Addresses: []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "10.100.1.9"}},
				Conditions:      []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue, LastHeartbeatTime: metav1.Now()}},
				DaemonEndpoints: corev1.NodeDaemonEndpoints{KubeletEndpoint: corev1.DaemonEndpoint{Port: 10250}}}
			_, err = eb.c.CoreV1().Nodes().UpdateStatus(ctx, ghost, metav1.UpdateOptions{})
			return err == nil, fmt.Sprint(err)
		})
		r := eb.expectStep(t, "", []string{"svc/web"}, "node/ghost", explain.StatusWarning, "node ghost does not answer")
		for _, s := range r.Steps {
			if s.Name == "node/node1" && s.Status != explain.StatusOK {
				t.Errorf("node1 after a silent node: got %s %q, want ok", s.Status, s.Message)
			}
		}
	})
	t.Run("explain's own failures exit 2, not 1 (broken)", func(t *testing.T) {
		unreachable := filepath.Join(t.TempDir(), "kubeconfig")
		kc, err := os.ReadFile(eb.s.Kubeconfig())
		if err != nil {
			t.Fatal(err)
		}
		lines := strings.Split(string(kc), "\n")
		for i, l := range lines {
			if k, _, ok := strings.Cut(l, "server: "); ok {
				lines[i] = k + "server: https://127.0.0.1:1"
			}
		}
		if err := os.WriteFile(unreachable, []byte(strings.Join(lines, "\n")), 0o600); err != nil {
			t.Fatal(err)
		}
		for _, tc := range []struct {
			name, kubeconfig string
			args             []string
		}{
			{"the API server unreachable", unreachable, []string{"svc/web"}},
			{"a target form it does not understand", "", []string{"deploy/web"}},
			{"a bad -o", "", []string{"-o", "yaml", "svc/web"}},
			{"an unknown flag", "", []string{"--nosuch", "svc/web"}},
			{"no target", "", nil},
		} {
			if _, code, out := eb.explain(tc.kubeconfig, tc.args...); code != 2 {
				t.Errorf("%s: got exit %d, want 2\n%s", tc.name, code, out)
			}
		}
		if _, code, out := eb.explain("", "svc/typo"); code != 1 {
			t.Errorf("a broken Service: got exit %d, want 1\n%s", code, out)
		}
	})
	// Last: it stops node2's proxy for good.
	t.Run("pods on a node whose proxy is stopped", func(t *testing.T) {
		eb.proxy2.Process.Kill()
		eb.proxy2.Wait()
		eb.expectStep(t, "", []string{"svc/web"}, "node/node2", explain.StatusBroken, "the service proxy of node node2 does not answer")
	})
}

// ingressAnswer is the first answer on step of r, nil when none.
func ingressAnswer(r *explain.Report, step string) *explain.Answer {
	for _, s := range r.Steps {
		if s.Name == step && len(s.Answers) > 0 {
			return &s.Answers[0]
		}
	}
	return nil
}

// readOnlyUser returns a kubeconfig for a user who may read Services,
// pods, slices, nodes, Ingresses and events but not nodes/proxy.
func (eb *explainBed) readOnlyUser(t *testing.T) string {
	ctx := context.Background()
	role := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "explain-reader"}, Rules: []rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: []string{"services", "pods", "nodes", "events"}, Verbs: []string{"get", "list"}},
		{APIGroups: []string{"discovery.k8s.io"}, Resources: []string{"endpointslices"}, Verbs: []string{"get", "list"}},
		{APIGroups: []string{"networking.k8s.io"}, Resources: []string{"ingresses"}, Verbs: []string{"get", "list"}},
	}}
	if _, err := eb.c.RbacV1().ClusterRoles().Create(ctx, role, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	binding := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "explain-reader"},
		RoleRef:  rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: "explain-reader"},
		Subjects: []rbacv1.Subject{{Kind: "User", APIGroup: "rbac.authorization.k8s.io", Name: "reader"}}}
	if _, err := eb.c.RbacV1().ClusterRoleBindings().Create(ctx, binding, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	return eb.s.UserKubeconfig(t, "reader", eb.s.URL())
}
