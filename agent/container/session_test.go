//go:build linux

package container

import (
	"bytes"
	"io"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

func TestStartSession(t *testing.T) {
	sh, err := LookPath("sh", "/usr/bin:/bin", "")
	if err != nil {
		t.Skip("no sh")
	}
	cases := []struct {
		name, script, stdin string
		wantOut, wantErr    string
		wantCode            int
	}{
		{name: "stdin to stdout, exit code", script: "cat; exit 3", stdin: "hello\n", wantOut: "hello\n", wantCode: 3},
		{name: "stderr apart", script: "echo out; echo err >&2", wantOut: "out\n", wantErr: "err\n"},
		{name: "a background child does not hold the session", script: "sleep 30 & echo started", wantOut: "started\n"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			pr, pw, err := os.Pipe()
			if err != nil {
				t.Fatal(err)
			}
			go func() { io.WriteString(pw, tc.stdin); pw.Close() }()
			var out, errOut bytes.Buffer
			p, err := StartSession(Spec{Path: sh, Args: []string{"sh", "-c", tc.script}}, Session{Stdin: pr, Stdout: &out, Stderr: &errOut})
			pr.Close()
			if err != nil {
				t.Fatal(err)
			}
			<-p.Done()
			p.Signal(unix.SIGKILL)
			code, _ := p.ExitCode()
			if out.String() != tc.wantOut || errOut.String() != tc.wantErr || code != tc.wantCode {
				t.Errorf("got stdout %q, stderr %q, exit %d; want %q, %q, %d", out.String(), errOut.String(), code, tc.wantOut, tc.wantErr, tc.wantCode)
			}
		})
	}
}

func TestSessionOnPTY(t *testing.T) {
	sh, err := LookPath("sh", "/usr/bin:/bin", "")
	if err != nil {
		t.Skip("no sh")
	}
	master, slave, err := OpenPTY()
	if err != nil {
		t.Skipf("no pty: %v", err)
	}
	defer master.Close()
	if err := SetSize(master, 100, 40); err != nil {
		t.Fatal(err)
	}
	p, err := StartSession(Spec{Path: sh, Args: []string{"sh", "-c", "tty; stty size; exit 7"}},
		Session{Stdin: slave, Stdout: slave, Stderr: slave, TTY: true})
	slave.Close()
	if err != nil {
		t.Fatal(err)
	}
	<-p.Done()
	// The output stays readable after the command exits, until EIO.
	master.SetReadDeadline(time.Now().Add(5 * time.Second))
	var out bytes.Buffer
	io.Copy(&out, master)
	code, _ := p.ExitCode()
	if !strings.Contains(out.String(), "/dev/pts/") || !strings.Contains(out.String(), "40 100") || code != 7 {
		t.Errorf("got output %q, exit %d; want a /dev/pts/ name, size 40 100, exit 7", out.String(), code)
	}
}

// TestSessionJoinsCgroups: an exec session's command is moved into the
// container's cgroups (here plain files standing for cgroup.procs), and
// a cgroup it cannot join fails the start rather than running it
// unlimited.
func TestSessionJoinsCgroups(t *testing.T) {
	sh, err := LookPath("sh", "/usr/bin:/bin", "")
	if err != nil {
		t.Skip("no sh")
	}
	dir := t.TempDir()
	procs := []string{dir + "/memory.procs", dir + "/cpu.procs"}
	p, err := StartSession(Spec{Path: sh, Args: []string{"sh", "-c", "exit 0"}, Cgroups: procs}, Session{})
	if err != nil {
		t.Fatal(err)
	}
	<-p.Done()
	for _, f := range procs {
		if got, _ := os.ReadFile(f); string(got) != strconv.Itoa(p.Pid) {
			t.Errorf("%s: got %q, want the PID %d", f, got, p.Pid)
		}
	}
	if _, err := StartSession(Spec{Path: sh, Args: []string{"sh", "-c", "sleep 30"}, Cgroups: []string{dir + "/missing/cgroup.procs"}}, Session{}); err == nil || !strings.Contains(err.Error(), "join cgroup") {
		t.Errorf("got %v, want a join cgroup error", err)
	}
}
