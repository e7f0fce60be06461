//go:build linux

package agent

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/remotecommand"
	utilexec "k8s.io/client-go/util/exec"

	"portal.dev/portal/agent/cgroup"
)

// TestRemoteCommand runs commands through the remote command protocol as
// client-go's SPDY executor (kubectl's, and the API server's stream
// translator's) speaks it, here without namespaces: stdin, stdout and
// stderr apart, the exit code, a command not on PATH.
func TestRemoteCommand(t *testing.T) {
	if _, err := os.Stat("/bin/sh"); err != nil {
		t.Skip("no /bin/sh")
	}
	a := &Agent{}
	target := &execTarget{env: []string{"PATH=/usr/bin:/bin", "GREETING=hi"}}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		cs, req := openCommandSession(w, r, "exec")
		if cs == nil {
			t.Error("the session did not start")
			return
		}
		defer cs.close()
		code, err := a.runCommand(cs, target, r.URL.Query()["command"], req.tty)
		cs.finish(code, err)
	}))
	defer srv.Close()
	cases := []struct {
		name, stdin        string
		command            []string
		wantOut            string
		wantCode           int
		wantErrOutContains string
	}{
		{name: "stdin, stdout, environment", stdin: "piped\n", command: []string{"sh", "-c", `cat; echo "$GREETING"`}, wantOut: "piped\nhi\n"},
		{name: "stderr apart", command: []string{"sh", "-c", "echo out; echo err >&2"}, wantOut: "out\n", wantErrOutContains: "err\n"},
		{name: "exit code", command: []string{"sh", "-c", "exit 3"}, wantCode: 3},
		{name: "not on PATH", command: []string{"nosuch"}, wantCode: 127, wantErrOutContains: `exec: "nosuch": executable file not found in $PATH`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			u, _ := url.Parse(srv.URL + "/exec/demo/web/main")
			q := url.Values{"command": tc.command, "output": {"1"}, "error": {"1"}, "input": {"1"}}
			u.RawQuery = q.Encode()
			ex, err := remotecommand.NewSPDYExecutor(&rest.Config{Host: srv.URL}, "POST", u)
			if err != nil {
				t.Fatal(err)
			}
			var out, errOut bytes.Buffer
			err = ex.StreamWithContext(context.Background(), remotecommand.StreamOptions{
				Stdin: strings.NewReader(tc.stdin), Stdout: &out, Stderr: &errOut})
			code := 0
			var ce utilexec.CodeExitError
			if errors.As(err, &ce) {
				code = ce.Code
			} else if err != nil {
				t.Fatal(err)
			}
			if out.String() != tc.wantOut || code != tc.wantCode || !strings.Contains(errOut.String(), tc.wantErrOutContains) {
				t.Errorf("got stdout %q, stderr %q, exit %d; want %q, stderr with %q, exit %d",
					out.String(), errOut.String(), code, tc.wantOut, tc.wantErrOutContains, tc.wantCode)
			}
		})
	}
}

// TestExecFindsCommandInContainersView pins exec looking the command up
// on the agent's own file system: "./run.sh" must be found in the working
// directory of the container's process, not the agent's.
func TestExecFindsCommandInContainersView(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(dir+"/run.sh", []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("sleep", "60")
	cmd.Dir = dir
	if err := cmd.Start(); err != nil {
		t.Skip("no sleep binary")
	}
	defer func() { cmd.Process.Kill(); cmd.Wait() }()
	target := &execTarget{proc: &fakeProc{pid: cmd.Process.Pid, done: make(chan struct{})}, env: []string{"PATH=/usr/bin:/bin"}}
	spec, err := (&Agent{}).commandSpec(target, []string{"./run.sh", "arg"})
	if err != nil {
		t.Fatalf("exec ./run.sh in a container whose working dir is %s: %v", dir, err)
	}
	if !slices.Contains(spec.Args, "./run.sh") {
		t.Errorf("got argv %q, want it to run ./run.sh", spec.Args)
	}
}

// TestExecWithoutContainerCgroup pins a bug: a container adopted from an
// agent that ran without cgroups has none at the expected path, and every
// exec into it failed to join it. It is exec'd outside any cgroup; one
// that has its cgroup is exec'd in it.
func TestExecWithoutContainerCgroup(t *testing.T) {
	root := t.TempDir()
	for _, d := range []string{"memory", "cpu", "cpuacct"} {
		os.MkdirAll(filepath.Join(root, d), 0o755)
		os.WriteFile(filepath.Join(root, d, "cgroup.procs"), nil, 0o644)
	}
	m, err := cgroup.Detect(root, "", "")
	if err != nil {
		t.Fatal(err)
	}
	a := &Agent{cgroups: m}
	pod := &corev1.Pod{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "adopted"}, {Name: "fresh"}}}}
	pod.UID = "u1"
	procs, err := m.Container("u1", "fresh", cgroup.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range procs { // the kernel's file, in a real cgroup
		os.WriteFile(p, nil, 0o644)
	}
	rt := &podRuntime{sandboxUp: true, st: podState{HostNetwork: true}, ctrs: map[string]*ctrRuntime{}}
	for _, c := range pod.Spec.Containers {
		rt.ctrs[c.Name] = &ctrRuntime{st: &ctrState{}, env: []string{"PATH=/usr/bin:/bin"},
			proc: &fakeProc{pid: os.Getpid(), done: make(chan struct{})}}
	}
	w := &podWorker{pod: pod, rt: rt}
	a.publishTargets(w)
	if got := w.targets.ctrs["adopted"].cgroups; got != nil {
		t.Errorf("adopted container: got cgroups %v, want none to join", got)
	}
	spec, err := a.commandSpec(w.targets.ctrs["adopted"], []string{"true"})
	if err != nil || spec.Cgroups != nil {
		t.Errorf("exec into the adopted container: got %v, cgroups %v; want it run outside any cgroup", err, spec.Cgroups)
	}
	if got := w.targets.ctrs["fresh"].cgroups; len(got) != 3 {
		t.Errorf("container with a cgroup: got cgroups %v, want its 3 cgroup.procs files", got)
	}
}
