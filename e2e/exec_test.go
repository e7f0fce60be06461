package e2e

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/clientcmd"

	"portal.dev/portal/agent/container"
)

// kubectlRun runs kubectl with stdin and returns its stdout, stderr and
// exit code.
func (ab *agentBed) kubectlRun(stdin string, args ...string) (stdout, stderr string, code int) {
	ab.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := ab.kubectlCmd(args...)
	cmd = exec.CommandContext(ctx, cmd.Path, cmd.Args[1:]...)
	cmd.Env = append(os.Environ(), "KUBECONFIG="+ab.server.Kubeconfig())
	cmd.Stdin = strings.NewReader(stdin)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		code = ee.ExitCode()
	case err != nil:
		ab.t.Fatalf("kubectl %s: %v", strings.Join(args, " "), err)
	}
	return out.String(), errOut.String(), code
}

// agentUsage is what the node1 agent holds: open file descriptors and
// goroutines (its goroutine profile, read through nodes/proxy).
func (ab *agentBed) agentUsage() (fds, goroutines int) {
	ab.t.Helper()
	entries, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", ab.agent.Process.Pid))
	if err != nil {
		ab.t.Fatal(err)
	}
	out := ab.server.MustKubectl("get", "--raw", "/api/v1/nodes/node1/proxy/debug/pprof/goroutine")
	m := regexp.MustCompile(`goroutine profile: total (\d+)`).FindStringSubmatch(out)
	if m == nil {
		ab.t.Fatalf("agent goroutine profile: got %.200q", out)
	}
	n, _ := strconv.Atoi(m[1])
	return len(entries), n
}

// checkNoLeak waits until the agent holds no more descriptors and
// goroutines than before (plus slack for idle TLS connections), and
// fails with the figures if it does not.
func (ab *agentBed) checkNoLeak(fds0, g0 int, what string) {
	ab.t.Helper()
	var fds, g int
	deadline := time.Now().Add(20 * time.Second)
	for {
		fds, g = ab.agentUsage()
		if fds <= fds0+4 && g <= g0+8 {
			ab.t.Logf("%s: agent fds %d -> %d, goroutines %d -> %d", what, fds0, fds, g0, g)
			return
		}
		if time.Now().After(deadline) {
			ab.t.Fatalf("%s: agent leaked: fds %d -> %d, goroutines %d -> %d", what, fds0, fds, g0, g)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// sessionProcesses counts the processes left from exec sessions: those
// whose command line carries marker.
func sessionProcesses(marker string) int {
	n := 0
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue
		}
		cmdline, _ := os.ReadFile("/proc/" + e.Name() + "/cmdline")
		if bytes.Contains(cmdline, []byte(marker)) {
			n++
		}
	}
	return n
}

func runningReady(p *corev1.Pod) bool { return p.Status.Phase == corev1.PodRunning && podReady(p) }

// TestExec: kubectl exec runs commands inside a pod's container, with its
// environment, working directory and host name, stdin piped in, stdout and
// stderr apart, exit codes passed on, and through a pty with -it. Bad
// input gets kubectl's usual errors, and the agent keeps no process,
// descriptor or goroutine of a session.
func TestExec(t *testing.T) {
	ab := newAgentBed(t)
	volDir := createExecPods(t, ab)
	fds0, g0 := ab.agentUsage()

	t.Run("environment, working dir, host name", func(t *testing.T) {
		out, errOut, code := ab.kubectlRun("", "exec", "web", "--", "sh", "-c", `echo "$GREETING $(pwd) $(hostname)"`)
		if want := "from-env /tmp web\n"; out != want || code != 0 {
			t.Errorf("got %q (exit %d, stderr %q), want %q", out, code, errOut, want)
		}
	})
	t.Run("stdin piped in", func(t *testing.T) {
		in := strings.Repeat("line of input\n", 5000)
		out, errOut, code := ab.kubectlRun(in, "exec", "-i", "web", "--", "sh", "-c", "cat; echo end")
		if out != in+"end\n" || code != 0 {
			t.Errorf("got %d bytes (exit %d, stderr %q), want %d bytes back", len(out), code, errOut, len(in)+4)
		}
	})
	t.Run("stdout and stderr apart", func(t *testing.T) {
		out, errOut, code := ab.kubectlRun("", "exec", "web", "--", "sh", "-c", "echo out; echo err >&2")
		if out != "out\n" || !strings.Contains(errOut, "err") || code != 0 {
			t.Errorf("got stdout %q, stderr %q, exit %d; want out, err, 0", out, errOut, code)
		}
	})
	for _, tc := range []struct {
		name    string
		cmd     []string
		code    int
		wantErr string
	}{
		{"false", []string{"false"}, 1, "command terminated with exit code 1"},
		{"exit 3", []string{"sh", "-c", "exit 3"}, 3, "command terminated with exit code 3"},
		{"no such command", []string{"nosuch"}, 127, `exec: "nosuch": executable file not found in $PATH`},
	} {
		t.Run("exit code "+tc.name, func(t *testing.T) {
			_, errOut, code := ab.kubectlRun("", append([]string{"exec", "web", "--"}, tc.cmd...)...)
			if code != tc.code || !strings.Contains(errOut, tc.wantErr) {
				t.Errorf("got exit %d, stderr %q; want exit %d, stderr with %q", code, errOut, tc.code, tc.wantErr)
			}
		})
	}
	t.Run("command on a mount only the container has", func(t *testing.T) { execFromContainerMount(t, ab, volDir) })
	t.Run("tty", func(t *testing.T) { execTTY(t, ab) })
	t.Run("attach", func(t *testing.T) { attach(t, ab) })
	t.Run("kubectl cp both ways", func(t *testing.T) { copyBothWays(t, ab) })
	t.Run("SPDY fallback", func(t *testing.T) {
		t.Setenv("KUBECTL_REMOTE_COMMAND_WEBSOCKETS", "false")
		out, errOut, code := ab.kubectlRun("piped\n", "exec", "-i", "web", "--", "sh", "-c", "cat; exit 4")
		if out != "piped\n" || code != 4 {
			t.Errorf("got %q, exit %d (stderr %q); want the input back and exit 4", out, code, errOut)
		}
	})
	t.Run("bad input", func(t *testing.T) { execBadInput(t, ab) })
	t.Run("RBAC", func(t *testing.T) { execRBAC(t, ab) })
	t.Run("client gone mid-stream", func(t *testing.T) { execClientGone(t, ab) })
	t.Run("anonymous gets 401", func(t *testing.T) {
		for _, sub := range []string{"exec?command=true&stdout=true", "attach?stdout=true", "portforward?ports=80"} {
			code := anonymousPost(t, ab, "/api/v1/namespaces/default/pods/web/"+sub)
			if code != http.StatusUnauthorized {
				t.Errorf("anonymous POST pods/%s: got %d, want 401", sub, code)
			}
		}
	})
	t.Run("the agent's port serves the API server only", func(t *testing.T) { agentPortServesAPIServerOnly(t, ab) })
	logExecRoundTrip(t, ab)
	ab.checkNoLeak(fds0, g0, "after exec sessions")
}

// createExecPods creates the pods TestExec runs commands in and waits for
// web. It returns vol's workingDir, where vol mounts a tmpfs over
// scripts/ with run.sh in it, seen only inside vol's mount namespace.
func createExecPods(t *testing.T, ab *agentBed) string {
	web := sh("web", "exec sleep 3600")
	web.Spec.Containers[0].Env = []corev1.EnvVar{{Name: "GREETING", Value: "from-env"}}
	web.Spec.Containers[0].WorkingDir = "/tmp"
	ab.create(web)
	done := sh("done", "true")
	done.Spec.RestartPolicy = corev1.RestartPolicyNever
	ab.create(done)
	broken := sh("broken", "")
	broken.Spec.Containers[0].Command = []string{"/nonexistent/server"}
	ab.create(broken)
	reader := sh("reader", `while read l; do echo "got $l"; done; echo bye`)
	reader.Spec.Containers[0].Stdin, reader.Spec.Containers[0].StdinOnce = true, true
	reader.Spec.RestartPolicy = corev1.RestartPolicyNever
	ab.create(reader)
	ab.create(sh("ticker", "while true; do echo tick; sleep 0.2; done"))
	term := sh("term", "exec sh")
	term.Spec.Containers[0].Stdin, term.Spec.Containers[0].TTY = true, true
	ab.create(term)
	volDir := t.TempDir()
	vol := sh("vol", `S="$DIR/scripts" && mkdir -p "$S" && mount -t tmpfs none "$S" && printf '#!/bin/sh\necho from-the-mount\n' >"$S/run.sh" && chmod +x "$S/run.sh" && exec sleep 3600`)
	vol.Spec.Containers[0].Env = []corev1.EnvVar{{Name: "DIR", Value: volDir}}
	vol.Spec.Containers[0].WorkingDir = volDir
	ab.create(vol)
	ab.waitPod("web", 30*time.Second, "Running", runningReady)
	ab.waitPod("vol", 30*time.Second, "Running", runningReady)
	return volDir
}

// execFromContainerMount pins exec looking commands up on the agent's file
// system: a script on a mount that only the container's mount namespace
// has runs, by its absolute path and relative to the workingDir.
func execFromContainerMount(t *testing.T, ab *agentBed, dir string) {
	if _, err := os.Stat(dir + "/scripts/run.sh"); err == nil {
		t.Fatalf("%s/scripts/run.sh is visible on the node; the test needs a mount only the container has", dir)
	}
	for _, command := range []string{dir + "/scripts/run.sh", "./scripts/run.sh"} {
		out, errOut, code := ab.kubectlRun("", "exec", "vol", "--", command)
		if out != "from-the-mount\n" || code != 0 {
			t.Errorf("kubectl exec vol -- %s: got %q, exit %d (stderr %q); want %q", command, out, code, errOut, "from-the-mount\n")
		}
	}
}

// execClientGone: a kubectl exec killed mid-session leaves no process of
// the session in the pod.
func execClientGone(t *testing.T, ab *agentBed) {
	cmd := ab.kubectlCmd("exec", "web", "--", "sh", "-c", "echo started; exec sleep 4242")
	stdout, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 8)
	io.ReadFull(stdout, buf)
	if sessionProcesses("4242") == 0 {
		t.Fatalf("the exec'd sleep is not running (read %q)", buf)
	}
	cmd.Process.Kill()
	cmd.Wait()
	waitFor(t, 15*time.Second, func() bool { return sessionProcesses("4242") == 0 })
}

// agentPortServesAPIServerOnly: the agent's stream endpoints refuse a
// client certificate other than the API server's, and clients without one.
func agentPortServesAPIServerOnly(t *testing.T, ab *agentBed) {
	admin, err := clientcmd.BuildConfigFromFlags("", ab.server.Kubeconfig())
	if err != nil {
		t.Fatal(err)
	}
	adminCert, err := tls.X509KeyPair(admin.TLSClientConfig.CertData, admin.TLSClientConfig.KeyData)
	if err != nil {
		t.Fatal(err)
	}
	for _, path := range []string{"/exec/default/web/main?command=true&output=1", "/attach/default/web/main?output=1", "/portForward/default/web"} {
		for _, certs := range [][]tls.Certificate{{adminCert}, nil} {
			c := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{DialContext: ab.node.DialContext,
				TLSClientConfig: &tls.Config{Certificates: certs, InsecureSkipVerify: true}}}
			resp, err := c.Post("https://"+agentNodeIP+":10250"+path, "", nil)
			if err == nil {
				resp.Body.Close()
				if resp.StatusCode != http.StatusForbidden {
					t.Errorf("POST %s with %d client certificates: got %d, want 403 or no TLS session", path, len(certs), resp.StatusCode)
				}
			} else if len(certs) > 0 {
				t.Errorf("POST %s with the admin certificate: %v, want 403", path, err)
			}
		}
	}
}

// logExecRoundTrip logs how long `kubectl exec -- true` takes.
func logExecRoundTrip(t *testing.T, ab *agentBed) {
	var times []time.Duration
	for range 15 {
		start := time.Now()
		if _, errOut, code := ab.kubectlRun("", "exec", "web", "--", "true"); code != 0 {
			t.Fatalf("kubectl exec -- true: exit %d: %s", code, errOut)
		}
		times = append(times, time.Since(start))
	}
	slices.Sort(times)
	t.Logf("kubectl exec -- true: p50 %v (min %v, max %v, %d runs, kubectl start included)", times[len(times)/2], times[0], times[len(times)-1], len(times))
}

// anonymousPost posts to the API without credentials and returns the
// status code.
func anonymousPost(t *testing.T, ab *agentBed, path string) int {
	t.Helper()
	c := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{DialContext: ab.server.Dial,
		TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
	resp, err := c.Post(ab.server.URL()+path, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// ptyKubectl is kubectl running on a pty the test holds, as in a user's
// terminal.
type ptyKubectl struct {
	t      *testing.T
	cmd    *exec.Cmd
	master *os.File
	mu     sync.Mutex
	out    bytes.Buffer
	copied chan struct{}
}

func startOnPTY(t *testing.T, ab *agentBed, args ...string) *ptyKubectl {
	t.Helper()
	master, slave, err := container.OpenPTY()
	if err != nil {
		t.Fatal(err)
	}
	container.SetSize(master, 91, 33)
	k := &ptyKubectl{t: t, cmd: ab.kubectlCmd(args...), master: master, copied: make(chan struct{})}
	k.cmd.Stdin, k.cmd.Stdout, k.cmd.Stderr = slave, slave, slave
	k.cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true}
	if err := k.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	slave.Close()
	go func() {
		defer close(k.copied)
		buf := make([]byte, 4096)
		for {
			n, err := master.Read(buf)
			k.mu.Lock()
			k.out.Write(buf[:n])
			k.mu.Unlock()
			if err != nil {
				return
			}
		}
	}()
	return k
}

func (k *ptyKubectl) output() string {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.out.String()
}

// typeUntil types line into the terminal until want shows in the output
// (a session may need a moment before it reads its input).
func (k *ptyKubectl) typeUntil(line, want string) {
	k.t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !strings.Contains(k.output(), want) {
		if time.Now().After(deadline) {
			k.t.Fatalf("no %q in the terminal after typing %q; output %q", want, line, k.output())
		}
		k.master.Write([]byte(line))
		time.Sleep(300 * time.Millisecond)
	}
}

// wait waits for kubectl to exit and returns its exit code.
func (k *ptyKubectl) wait() int {
	k.t.Helper()
	err := k.cmd.Wait()
	k.master.SetReadDeadline(time.Now().Add(2 * time.Second))
	<-k.copied
	k.master.Close()
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return ee.ExitCode()
	}
	if err != nil {
		k.t.Fatal(err)
	}
	return 0
}

// execTTY runs an interactive shell with kubectl exec -it: tty names its
// terminal, stty reports the size kubectl passed on, and the shell's exit
// status comes back as kubectl's.
func execTTY(t *testing.T, ab *agentBed) {
	k := startOnPTY(t, ab, "exec", "-it", "web", "--", "sh")
	k.typeUntil("tty; stty size; echo marker-$((40+2))\n", "marker-42")
	k.master.Write([]byte("exit 5\n"))
	if code := k.wait(); code != 5 {
		t.Errorf("kubectl exec -it: got exit %d, want 5; output %q", code, k.output())
	}
	for _, want := range []string{"/dev/pts/", "33 91"} {
		if !strings.Contains(k.output(), want) {
			t.Errorf("kubectl exec -it: output %q lacks %q", k.output(), want)
		}
	}
}

// attach: kubectl attach -i feeds a container's held stdin and shows its
// output; -it reaches a shell on the container's own terminal.
func attach(t *testing.T, ab *agentBed) {
	ab.waitPod("reader", 30*time.Second, "Running", runningReady)
	ab.waitPod("term", 30*time.Second, "Running", runningReady)
	t.Run("stdin", func(t *testing.T) {
		out, errOut, code := ab.kubectlRun("one\ntwo\n", "attach", "-i", "reader")
		for _, want := range []string{"got one\n", "got two\n", "bye\n"} {
			if !strings.Contains(out, want) {
				t.Errorf("kubectl attach -i: output %q (exit %d, stderr %q) lacks %q", out, code, errOut, want)
			}
		}
	})
	t.Run("tty", func(t *testing.T) {
		k := startOnPTY(t, ab, "attach", "-it", "term")
		k.typeUntil("echo marker-$((40+2)) $(tty)\n", "marker-42 /dev/pts/")
		k.master.Write([]byte("exit\n"))
		if code := k.wait(); code != 0 {
			t.Errorf("kubectl attach -it: got exit %d, want 0; output %q", code, k.output())
		}
	})
	t.Run("kubectl run -i --rm", func(t *testing.T) {
		out, errOut, code := ab.kubectlRun("hi\n", "run", "-i", "--rm", "--restart=Never", "once", "--image=debian",
			"--command", "--", "sh", "-c", `read l; echo "got $l"`)
		if !strings.Contains(out, "got hi") || code != 0 {
			t.Errorf("kubectl run -i --rm: got %q (exit %d, stderr %q), want got hi", out, code, errOut)
		}
	})
	t.Run("output of a container without stdin", func(t *testing.T) {
		ab.waitPod("ticker", 30*time.Second, "Running", runningReady)
		k := startOnPTY(t, ab, "attach", "ticker")
		// What the container writes from now on: new ticks.
		waitFor(t, 20*time.Second, func() bool { return strings.Count(k.output(), "tick") >= 2 })
		k.cmd.Process.Kill()
		k.wait()
	})
}

// execBadInput: a container name the pod lacks, a pod whose container is
// not running, a finished pod, a pod that does not exist.
func execBadInput(t *testing.T, ab *agentBed) {
	ab.waitPod("broken", 30*time.Second, "waiting", func(p *corev1.Pod) bool {
		return len(p.Status.ContainerStatuses) > 0 && p.Status.ContainerStatuses[0].State.Running == nil
	})
	ab.waitPod("done", 30*time.Second, "Succeeded", func(p *corev1.Pod) bool { return p.Status.Phase == corev1.PodSucceeded })
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"no such container", []string{"exec", "web", "-c", "nosuch", "--", "true"}, "container nosuch is not valid for pod web"},
		{"container not running", []string{"exec", "broken", "--", "true"}, `container not found ("main")`},
		{"completed pod", []string{"exec", "done", "--", "true"}, "cannot exec into a container in a completed pod; current phase is Succeeded"},
		{"no such pod", []string{"exec", "nosuch", "--", "true"}, `pods "nosuch" not found`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, errOut, code := ab.kubectlRun("", tc.args...)
			if code == 0 || !strings.Contains(errOut, tc.want) {
				t.Errorf("got exit %d, stderr %q; want an error with %q", code, errOut, tc.want)
			}
		})
	}
}

// copyBothWays copies a directory tree into the pod with kubectl cp and
// back out, and compares every file. Pods see the node's filesystem, so
// the tree's place in the pod is a directory of the test's.
func copyBothWays(t *testing.T, ab *agentBed) {
	src, inPod, back := t.TempDir(), t.TempDir(), t.TempDir()
	files := map[string][]byte{"a.txt": []byte("hello\n"), "sub/b.bin": make([]byte, 3<<20), "sub/deeper/c": {}, "sp ace": []byte("x")}
	rand.Read(files["sub/b.bin"])
	for name, data := range files {
		p := filepath.Join(src, "tree", name)
		os.MkdirAll(filepath.Dir(p), 0o755)
		if err := os.WriteFile(p, data, 0o640); err != nil {
			t.Fatal(err)
		}
	}
	if _, errOut, code := ab.kubectlRun("", "cp", filepath.Join(src, "tree"), "web:"+filepath.Join(inPod, "tree")); code != 0 {
		t.Fatalf("kubectl cp into the pod: exit %d: %s", code, errOut)
	}
	if _, errOut, code := ab.kubectlRun("", "cp", "web:"+filepath.Join(inPod, "tree"), filepath.Join(back, "tree")); code != 0 {
		t.Fatalf("kubectl cp out of the pod: exit %d: %s", code, errOut)
	}
	for _, dir := range []string{inPod, back} {
		for name, want := range files {
			got, err := os.ReadFile(filepath.Join(dir, "tree", name))
			if err != nil || !bytes.Equal(got, want) {
				t.Errorf("%s in %s: got %d bytes (%v), want %d identical bytes", name, dir, len(got), err, len(want))
			}
		}
	}
}
