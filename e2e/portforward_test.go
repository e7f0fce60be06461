package e2e

import (
	"bufio"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// portForward is a running kubectl port-forward and what it printed.
type portForward struct {
	mu  sync.Mutex
	out strings.Builder
}

func (pf *portForward) output() string {
	pf.mu.Lock()
	defer pf.mu.Unlock()
	return pf.out.String()
}

// startPortForward runs kubectl port-forward in the node's namespace and
// returns once it listens on localPort; it is stopped when the test ends.
func (ab *agentBed) startPortForward(t *testing.T, target string, localPort, remotePort int) (*portForward, func()) {
	t.Helper()
	cmd := ab.kubectlCmd("port-forward", target, fmt.Sprintf("%d:%d", localPort, remotePort))
	r, w := io.Pipe()
	cmd.Stdout, cmd.Stderr = w, w
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	stop := func() {
		if cmd.ProcessState == nil {
			cmd.Process.Kill()
			cmd.Wait()
		}
		w.Close()
	}
	t.Cleanup(stop)
	pf := &portForward{}
	listening := make(chan struct{})
	go func() {
		sc := bufio.NewScanner(r)
		for sc.Scan() {
			pf.mu.Lock()
			pf.out.WriteString(sc.Text() + "\n")
			pf.mu.Unlock()
			if strings.HasPrefix(sc.Text(), "Forwarding from 127.0.0.1:") {
				select {
				case <-listening:
				default:
					close(listening)
				}
			}
		}
	}()
	select {
	case <-listening:
	case <-time.After(30 * time.Second):
		t.Fatalf("kubectl port-forward %s: not listening after 30s:\n%s", target, pf.output())
	}
	return pf, stop
}

// nodeHTTP is an HTTP client that connects from the node's namespace.
func (ab *agentBed) nodeHTTP() *http.Client {
	return &http.Client{Timeout: 120 * time.Second, Transport: &http.Transport{DialContext: ab.node.DialContext,
		MaxIdleConnsPerHost: 100, DisableCompression: true}}
}

// parallelGets fetches url n times at once and returns the failures.
func parallelGets(c *http.Client, url string, n int) []string {
	var mu sync.Mutex
	var failed []string
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			resp, err := c.Get(url)
			if err == nil {
				_, err = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if err == nil && resp.StatusCode != http.StatusOK {
					err = fmt.Errorf("status %d", resp.StatusCode)
				}
			}
			if err != nil {
				mu.Lock()
				failed = append(failed, fmt.Sprintf("request %d: %v", i, err))
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	return failed
}

// download fetches url and returns the body's checksum and the rate.
func download(t *testing.T, c *http.Client, url string) ([32]byte, float64) {
	t.Helper()
	start := time.Now()
	resp, err := c.Get(url)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	h := sha256.New()
	n, err := io.Copy(h, resp.Body)
	if err != nil {
		t.Fatalf("GET %s: after %d bytes: %v", url, n, err)
	}
	var sum [32]byte
	copy(sum[:], h.Sum(nil))
	return sum, float64(n) / (1 << 20) / time.Since(start).Seconds()
}

// TestPortForward: kubectl port-forward to a pod and to a Service carries
// many connections at once and a large download intact, over kubectl's
// WebSocket tunnel and its SPDY fallback. Bad input (a pod not running, a
// port nobody listens on, a client gone mid-download, a thousand
// connections opened and dropped) gets kubectl's usual errors and leaves
// the agent nothing.
func TestPortForward(t *testing.T) {
	ab := newAgentBed(t)
	dir := t.TempDir()
	big := make([]byte, 100<<20)
	rand.Read(big)
	if err := os.WriteFile(filepath.Join(dir, "big"), big, 0o644); err != nil {
		t.Fatal(err)
	}
	want := sha256.Sum256(big)
	big = nil
	os.WriteFile(filepath.Join(dir, "index.html"), []byte("hello from web\n"), 0o644)
	web := sh("web", "cd "+dir+" && exec python3 -m http.server 8080 --bind 0.0.0.0")
	web.Spec.Containers[0].Ports = []corev1.ContainerPort{{Name: "http", ContainerPort: 8080}}
	web.Spec.Containers[0].ReadinessProbe = &corev1.Probe{PeriodSeconds: 1,
		ProbeHandler: corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{Port: intstr.FromInt32(8080)}}}
	ab.create(web)
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "web"}, Spec: corev1.ServiceSpec{
		Selector: map[string]string{"app": "web"},
		Ports:    []corev1.ServicePort{{Port: 80, TargetPort: intstr.FromString("http")}}}}
	if _, err := ab.c.CoreV1().Services("default").Create(context.Background(), svc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// pending is bound to a node no agent runs: it stays Pending.
	pending := sh("pending", "true")
	pending.Spec.NodeName = "ghost"
	ab.create(pending)
	pod := ab.waitPod("web", 30*time.Second, "Running", runningReady)
	fds0, g0 := ab.agentUsage()
	c := ab.nodeHTTP()

	_, direct := download(t, c, fmt.Sprintf("http://%s:8080/big", pod.Status.PodIP))
	for i, target := range []struct {
		name, target string
		remote       int
		spdy         bool
	}{
		{"pod/web", "pod/web", 8080, false},
		{"svc/web", "svc/web", 80, false},
		{"pod/web over SPDY", "pod/web", 8080, true},
	} {
		t.Run(target.name, func(t *testing.T) {
			if target.spdy {
				t.Setenv("KUBECTL_PORT_FORWARD_WEBSOCKETS", "false")
			}
			local := 18080 + i
			_, stop := ab.startPortForward(t, target.target, local, target.remote)
			defer stop()
			base := fmt.Sprintf("http://127.0.0.1:%d/", local)
			if failed := parallelGets(ab.nodeHTTP(), base, 50); len(failed) > 0 {
				t.Errorf("50 parallel requests: %d failed: %v", len(failed), failed)
			}
			sum, rate := download(t, ab.nodeHTTP(), base+"big")
			if sum != want {
				t.Errorf("100 MiB download: checksum %x, want %x", sum, want)
			}
			t.Logf("100 MiB through %s: %.0f MiB/s; direct to the pod: %.0f MiB/s (%.2fx)", target.name, rate, direct, rate/direct)
		})
	}
	t.Run("bad input", func(t *testing.T) { portForwardBadInput(t, ab) })
	ab.checkNoLeak(fds0, g0, "after port-forward sessions")
}

func portForwardBadInput(t *testing.T, ab *agentBed) {
	t.Run("pod not running", func(t *testing.T) {
		_, errOut, code := ab.kubectlRun("", "port-forward", "pod/pending", "18090:80")
		if want := "unable to forward port because pod is not running"; code == 0 || !strings.Contains(errOut, want) {
			t.Errorf("got exit %d, stderr %q; want an error with %q", code, errOut, want)
		}
	})
	t.Run("port nobody listens on", func(t *testing.T) {
		pf, _ := ab.startPortForward(t, "pod/web", 18091, 9999)
		conn, err := ab.node.DialContext(context.Background(), "tcp", "127.0.0.1:18091")
		if err != nil {
			t.Fatal(err)
		}
		conn.SetReadDeadline(time.Now().Add(20 * time.Second))
		n, _ := conn.Read(make([]byte, 1))
		conn.Close()
		if n != 0 {
			t.Errorf("read %d bytes from a port nobody listens on", n)
		}
		want := "error forwarding port 9999 to pod web"
		waitFor(t, 10*time.Second, func() bool { return strings.Contains(pf.output(), want) })
		if !strings.Contains(pf.output(), "connection refused") {
			t.Errorf("kubectl port-forward said %q; want %q and connection refused", pf.output(), want)
		}
	})
	t.Run("client gone mid-download", func(t *testing.T) {
		_, stop := ab.startPortForward(t, "pod/web", 18092, 8080)
		resp, err := ab.nodeHTTP().Get("http://127.0.0.1:18092/big")
		if err != nil {
			t.Fatal(err)
		}
		io.CopyN(io.Discard, resp.Body, 1<<20)
		stop()
		resp.Body.Close()
	})
	t.Run("1000 connections opened and dropped", func(t *testing.T) {
		pf, stop := ab.startPortForward(t, "pod/web", 18093, 8080)
		defer stop()
		var wg sync.WaitGroup
		var opened atomic.Int64
		for range 20 {
			wg.Go(func() {
				for range 50 {
					conn, err := ab.node.DialContext(context.Background(), "tcp", "127.0.0.1:18093")
					if err != nil {
						continue
					}
					opened.Add(1)
					conn.Write([]byte("GET /big HTTP/1.1\r\nHost: web\r\n\r\n"))
					conn.(*net.TCPConn).SetLinger(0)
					conn.Close()
				}
			})
		}
		wg.Wait()
		if n := opened.Load(); n < 1000 {
			t.Errorf("opened %d of 1,000 connections through kubectl port-forward, want all", n)
		}
		if failed := parallelGets(ab.nodeHTTP(), "http://127.0.0.1:18093/", 50); len(failed) > 0 {
			t.Errorf("after 1,000 dropped connections, 50 requests: %d failed: %v\nkubectl port-forward said: %s",
				len(failed), failed[:min(3, len(failed))], pf.output())
		}
	})
}
