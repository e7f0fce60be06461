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
	"strings"
	"testing"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/remotecommand"
	"k8s.io/client-go/util/exec"
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
			var ce exec.CodeExitError
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
