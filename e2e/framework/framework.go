// Package framework starts the real portal binary for end-to-end tests and
// gives them what a user has: a kubeconfig, kubectl, a client-go client.
// Every process it starts is killed when the test ends, also on failure.
package framework

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

var (
	buildOnce sync.Once
	binary    string
	buildErr  error
)

// Binary builds bin/portal once per test process and returns its path.
func Binary(t testing.TB) string {
	t.Helper()
	buildOnce.Do(func() {
		_, file, _, _ := runtime.Caller(0)
		root := filepath.Join(filepath.Dir(file), "..", "..")
		dir, err := os.MkdirTemp("", "portal-e2e-bin-")
		if err != nil {
			buildErr = err
			return
		}
		binary = filepath.Join(dir, "portal")
		cmd := exec.Command(filepath.Join(root, "hack", "build.sh"), binary)
		if out, err := cmd.CombinedOutput(); err != nil {
			buildErr = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return binary
}

// Server is a running `portal server` or `portal apiserver`.
type Server struct {
	t       testing.TB
	Command string // "server" or "apiserver"
	DataDir string
	Port    int
	Args    []string
	// Wrap prefixes the command line, e.g. `ip netns exec NODE` to run
	// the server inside a network namespace; Dial then reaches it there.
	Wrap []string
	Dial func(ctx context.Context, network, addr string) (net.Conn, error)
	// Ingress runs the server's Ingress controller when the server runs
	// in the host's network namespace, where it is left out unless asked
	// for: servers side by side cannot all have ports 80 and 443. Asked
	// for, it serves on HTTPPort and HTTPSPort (free ports when zero; set
	// at Start) and its metrics on an ephemeral port. A server in its own
	// namespace (Wrap) runs it anyway, on 80 and 443 of that namespace.
	Ingress bool
	// HTTPPort and HTTPSPort are the Ingress controller's ports when
	// Ingress is set.
	HTTPPort, HTTPSPort int

	cmd     *exec.Cmd
	log     *os.File
	dnsPort int
	// logStart is where the log of the latest Launch starts.
	logStart int64
}

// StartServer runs `portal server` with a fresh data directory on a free
// loopback port and waits until /readyz says ok.
func StartServer(t testing.TB, args ...string) *Server {
	t.Helper()
	s := &Server{t: t, Command: "server", DataDir: t.TempDir(), Port: FreePort(t), Args: args}
	s.Start()
	return s
}

// StartServerWithIngress is StartServer with the Ingress controller on,
// on the free ports s.HTTPPort and s.HTTPSPort of the host.
func StartServerWithIngress(t testing.TB, args ...string) *Server {
	t.Helper()
	s := &Server{t: t, Command: "server", DataDir: t.TempDir(), Port: FreePort(t), Args: args, Ingress: true}
	s.Start()
	return s
}

// Attach binds a Server built by hand to the test t before Start.
func Attach(t testing.TB, s *Server) { s.t = t }

// Start starts the process (again) and waits for readiness.
func (s *Server) Start() {
	s.t.Helper()
	s.Launch()
	s.WaitReady(90 * time.Second)
	s.checkIngress()
}

// checkIngress fails the test at once when the server left its Ingress
// controller out, which it does, with /readyz ok, when a port is taken:
// the test's requests would otherwise wait for an answer that never comes,
// and the log line that says why is long gone from the log's last lines.
func (s *Server) checkIngress() {
	s.t.Helper()
	if !s.Ingress {
		return
	}
	f, err := os.Open(filepath.Join(s.DataDir, "portal.log"))
	if err != nil {
		s.t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.Seek(s.logStart, io.SeekStart); err != nil {
		s.t.Fatal(err)
	}
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		if strings.Contains(sc.Text(), "Ingress controller left out") {
			s.t.Fatalf("portal %s left its Ingress controller out (HTTP port %d, HTTPS port %d):\n%s",
				s.Command, s.HTTPPort, s.HTTPSPort, sc.Text())
		}
	}
}

// Launch starts the process and returns at once, before it serves: for
// tests of what a server answers while it starts.
func (s *Server) Launch() {
	s.t.Helper()
	args := append([]string{s.Command, "--data-dir", s.DataDir, "--bind-address", "127.0.0.1",
		"--secure-port", fmt.Sprint(s.Port)}, s.serverArgs()...)
	log, err := os.OpenFile(filepath.Join(s.DataDir, "portal.log"), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o600)
	if err != nil {
		s.t.Fatal(err)
	}
	s.log = log
	if st, err := log.Stat(); err == nil {
		s.logStart = st.Size()
	}
	argv := append(append(append([]string{}, s.Wrap...), Binary(s.t)), args...)
	s.cmd = exec.Command(argv[0], argv[1:]...)
	s.cmd.Stdout, s.cmd.Stderr = log, log
	s.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := s.cmd.Start(); err != nil {
		s.t.Fatal(err)
	}
	cmd := s.cmd
	s.t.Cleanup(func() {
		if cmd.ProcessState == nil {
			cmd.Process.Kill()
			cmd.Wait()
		}
		if s.t.Failed() {
			s.dumpLog()
		}
	})
}

// serverArgs are the test's arguments plus what keeps `portal server`
// from touching the host when it runs there: no proxy or agent (they would
// program the host's kernel), no Ingress controller unless Ingress is set
// (then on free ports), and DNS on a free port with its HTTP endpoints on
// ephemeral ones, so servers can run side by side. They are worked out at
// every start, so a test that replaces Args between restarts keeps the
// protection; the DNS and Ingress ports stay the same across restarts.
func (s *Server) serverArgs() []string {
	if s.Command != "server" || len(s.Wrap) > 0 {
		return s.Args
	}
	args := slices.Clone(s.Args)
	has := func(flag string) int {
		for i, a := range args {
			if a == flag || strings.HasPrefix(a, flag+"=") {
				return i
			}
		}
		return -1
	}
	disable := "proxy,agent"
	if !s.Ingress {
		disable += ",ingress"
	}
	switch i := has("--disable"); {
	case i < 0:
		args = append(args, "--disable", disable)
	case strings.HasPrefix(args[i], "--disable="):
		args[i] += "," + disable
	case i+1 < len(args):
		args[i+1] += "," + disable
	}
	if has("--dns-port") < 0 {
		if s.dnsPort == 0 {
			s.dnsPort = FreePort(s.t)
		}
		args = append(args, "--dns-port", fmt.Sprint(s.dnsPort))
	}
	ephemeral := []string{"--dns-health-bind-address", "--dns-ready-bind-address", "--dns-metrics-bind-address"}
	if s.Ingress {
		args = append(args, s.ingressArgs(has)...)
		ephemeral = append(ephemeral, "--ingress-metrics-bind-address")
	}
	for _, f := range ephemeral {
		if has(f) < 0 {
			args = append(args, f, "127.0.0.1:0")
		}
	}
	return args
}

// ingressArgs are the Ingress controller's ports, free ones unless the
// test gave its own.
func (s *Server) ingressArgs(has func(string) int) []string {
	var args []string
	for _, p := range []struct {
		flag string
		port *int
	}{{"--http-port", &s.HTTPPort}, {"--https-port", &s.HTTPSPort}} {
		if has(p.flag) >= 0 {
			continue
		}
		if *p.port == 0 {
			*p.port = FreePort(s.t)
		}
		args = append(args, p.flag, fmt.Sprint(*p.port))
	}
	return args
}

// DNSPort is the port of the server's in-process DNS (UDP and TCP).
func (s *Server) DNSPort() string {
	for i, a := range s.Args {
		if a == "--dns-port" && i+1 < len(s.Args) {
			return s.Args[i+1]
		}
	}
	return fmt.Sprint(s.dnsPort)
}

func (s *Server) dumpLog() {
	data, _ := os.ReadFile(filepath.Join(s.DataDir, "portal.log"))
	lines := strings.Split(string(data), "\n")
	if len(lines) > 60 {
		lines = lines[len(lines)-60:]
	}
	s.t.Logf("last lines of %s log:\n%s", s.Command, strings.Join(lines, "\n"))
}

// WaitReady waits until GET /readyz answers ok and the kubeconfig exists.
func (s *Server) WaitReady(timeout time.Duration) {
	s.t.Helper()
	deadline := time.Now().Add(timeout)
	client := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{InsecureSkipVerify: true}, DialContext: s.Dial}}
	for time.Now().Before(deadline) {
		if s.cmd.ProcessState != nil {
			s.t.Fatalf("portal %s exited: %v", s.Command, s.cmd.ProcessState)
		}
		resp, err := client.Get(fmt.Sprintf("https://127.0.0.1:%d/readyz", s.Port))
		if err == nil {
			body := new(bytes.Buffer)
			body.ReadFrom(resp.Body)
			resp.Body.Close()
			if resp.StatusCode == 200 && body.String() == "ok" {
				if _, err := os.Stat(s.Kubeconfig()); err == nil {
					return
				}
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	s.dumpLog()
	s.t.Fatalf("portal %s not ready after %v", s.Command, timeout)
}

// Stop ends the process with SIGTERM and waits for it.
func (s *Server) Stop() {
	s.t.Helper()
	s.cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan struct{})
	go func() { s.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		s.cmd.Process.Kill()
		<-done
	}
}

// Kill ends the process with SIGKILL, as a crash would.
func (s *Server) Kill() {
	s.cmd.Process.Kill()
	s.cmd.Wait()
}

// Kubeconfig is the path of the admin kubeconfig the server wrote.
func (s *Server) Kubeconfig() string { return filepath.Join(s.DataDir, "admin.kubeconfig") }

// UserKubeconfig writes, with `portal kubeconfig`, a kubeconfig for user
// that reaches the API at server (a certificate from the server's CA), and
// returns its path.
func (s *Server) UserKubeconfig(t testing.TB, user, server string) string {
	t.Helper()
	kc := filepath.Join(t.TempDir(), "user.kubeconfig")
	if out, err := exec.Command(Binary(t), "kubeconfig", "--data-dir", s.DataDir, "--user", user,
		"--server", server, "-o", kc).CombinedOutput(); err != nil {
		t.Fatalf("kubeconfig for %s: %v\n%s", user, err, out)
	}
	return kc
}

// URL is the API's base URL.
func (s *Server) URL() string { return fmt.Sprintf("https://127.0.0.1:%d", s.Port) }

// RESTConfig is the admin client configuration.
func (s *Server) RESTConfig() *rest.Config {
	s.t.Helper()
	cfg, err := clientcmd.BuildConfigFromFlags("", s.Kubeconfig())
	if err != nil {
		s.t.Fatal(err)
	}
	cfg.QPS, cfg.Burst = 1000, 1000
	cfg.Dial = s.Dial
	return cfg
}

// Client is an admin client-go clientset.
func (s *Server) Client() kubernetes.Interface {
	s.t.Helper()
	c, err := kubernetes.NewForConfig(s.RESTConfig())
	if err != nil {
		s.t.Fatal(err)
	}
	return c
}

// Kubectl runs kubectl against the server: the kubectl on PATH when there
// is one (what a user has), else the one built into portal.
func (s *Server) Kubectl(args ...string) (string, error) {
	return s.KubectlStdin("", args...)
}

// KubectlStdin runs kubectl with stdin.
func (s *Server) KubectlStdin(stdin string, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	argv := append([]string{}, s.Wrap...)
	if path, err := exec.LookPath("kubectl"); err == nil {
		argv = append(append(argv, path), args...)
	} else {
		argv = append(append(argv, Binary(s.t), "kubectl"), args...)
	}
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Env = append(os.Environ(), "KUBECONFIG="+s.Kubeconfig())
	cmd.Stdin = strings.NewReader(stdin)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	return out.String(), err
}

// MustKubectl runs kubectl and fails the test on error.
func (s *Server) MustKubectl(args ...string) string {
	s.t.Helper()
	out, err := s.Kubectl(args...)
	if err != nil {
		s.t.Fatalf("kubectl %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return out
}

// MustKubectlStdin runs kubectl with stdin and fails the test on error.
func (s *Server) MustKubectlStdin(stdin string, args ...string) string {
	s.t.Helper()
	out, err := s.KubectlStdin(stdin, args...)
	if err != nil {
		s.t.Fatalf("kubectl %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return out
}

// Process is another portal process a test runs (a controller-manager, a
// proxy), killed when the test ends.
type Process struct {
	cmd *exec.Cmd
	Log string
}

// StartProcess runs the portal binary with args, its output in a log file
// under dir.
func StartProcess(t testing.TB, dir string, args ...string) *Process {
	t.Helper()
	f, err := os.CreateTemp(dir, "process-*.log")
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(Binary(t), args...)
	cmd.Stdout, cmd.Stderr = f, f
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &Process{cmd: cmd, Log: f.Name()}
	t.Cleanup(func() {
		p.Kill()
		f.Close()
		if t.Failed() {
			data, _ := os.ReadFile(p.Log)
			lines := strings.Split(string(data), "\n")
			if len(lines) > 40 {
				lines = lines[len(lines)-40:]
			}
			t.Logf("last lines of %v:\n%s", args, strings.Join(lines, "\n"))
		}
	})
	return p
}

// Kill ends the process with SIGKILL, as a crash would.
func (p *Process) Kill() {
	if p.cmd.ProcessState == nil {
		p.cmd.Process.Kill()
		p.cmd.Wait()
	}
}

// Cleanup removes the binary Binary built; call it from TestMain.
func Cleanup() {
	if binary != "" {
		os.RemoveAll(filepath.Dir(binary))
	}
}
