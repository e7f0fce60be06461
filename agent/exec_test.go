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
	"slices"
	"strings"
	"testing"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/remotecommand"
	utilexec "k8s.io/client-go/util/exec"
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
		req := parseStreamRequest(r)
		s := upgradeSPDY(w, r, []string{remoteCommandV4})
		if s == nil {
			return
		}
		defer s.close()
		cs, err := acceptStreams(s, req)
		if err != nil {
			t.Error(err)
			return
		}
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
