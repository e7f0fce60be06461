//go:build linux

package container

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

func TestParseStat(t *testing.T) {
	cases := []struct {
		line      string
		wantState string
		wantStart uint64
		wantOK    bool
	}{
		{"42 (sleep) S 1 42 42 0 -1 4194560 100 0 0 0 0 0 0 0 20 0 1 0 123456 5000 100", "S", 123456, true},
		{"42 (a b) c)) Z 1 42 42 0 -1 4194560 100 0 0 0 0 0 0 0 20 0 1 0 99 5000 100", "Z", 99, true},
		{"garbage", "", 0, false},
	}
	for _, tc := range cases {
		state, start, ok := parseStat(tc.line)
		if state != tc.wantState || start != tc.wantStart || ok != tc.wantOK {
			t.Errorf("parseStat(%q): got %q %d %v, want %q %d %v", tc.line, state, start, ok, tc.wantState, tc.wantStart, tc.wantOK)
		}
	}
}

func TestLookPath(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(dir+"/tool", []byte("#!/bin/sh\n"), 0o755)
	os.WriteFile(dir+"/data", nil, 0o644)
	cases := []struct {
		file, path string
		want       string
		wantErr    bool
	}{
		{"tool", "/nonexistent:" + dir, dir + "/tool", false},
		{"data", dir, "", true},
		{"missing", dir, "", true},
		{dir + "/tool", "", dir + "/tool", false},
	}
	for _, tc := range cases {
		got, err := LookPath(tc.file, tc.path, "")
		if got != tc.want || (err != nil) != tc.wantErr {
			t.Errorf("LookPath(%q, %q): got %q, %v, want %q (error %v)", tc.file, tc.path, got, err, tc.want, tc.wantErr)
		}
	}
}

// TestLookPathIn finds commands as a container's process sees the file
// system: a relative name from the process's working directory, not the
// agent's, and a script on a mount that exists only in the process's
// mount namespace (a pod's volume).
func TestLookPathIn(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(dir+"/run.sh", []byte("#!/bin/sh\n"), 0o755)
	os.Symlink("/"+strings.TrimLeft(dir, "/")+"/run.sh", dir+"/link")
	child := startChild(t, exec.Command("sh", "-c", "echo ready && exec sleep 60"), dir)
	for _, file := range []string{"./run.sh", "run.sh", dir + "/link"} {
		path := ""
		if file == "run.sh" {
			path = "/nonexistent:."
		}
		if _, err := LookPathIn(child, file, path); err != nil {
			t.Errorf("LookPathIn(%q, %q) with the process in %s: %v, want found", file, path, dir, err)
		}
	}

	// A tmpfs mounted in a mount namespace of the process's own.
	vol := t.TempDir()
	script := vol + "/only-inside.sh"
	cmd := exec.Command("unshare", "--user", "--map-root-user", "--mount", "--propagation", "private", "sh", "-c",
		`mount -t tmpfs none "$1" && printf '#!/bin/sh\n' >"$2" && chmod +x "$2" && echo ready && exec sleep 60`, "sh", vol, script)
	inside := startChild(t, cmd, "/")
	if inside == 0 {
		t.Skip("cannot make a mount namespace here (unshare)")
	}
	if _, err := LookPath(script, "", ""); err == nil {
		t.Fatalf("%s is visible outside the mount namespace", script)
	}
	if got, err := LookPathIn(inside, script, ""); err != nil || got != script {
		t.Errorf("LookPathIn(%q) inside the mount namespace: got %q, %v; want %q", script, got, err, script)
	}
}

// startChild starts cmd in dir and returns its PID once it has printed
// a line, or 0 if it failed before.
func startChild(t *testing.T, cmd *exec.Cmd, dir string) int {
	t.Helper()
	cmd.Dir = dir
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		return 0
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	if _, err := bufio.NewReader(out).ReadString('\n'); err != nil {
		return 0
	}
	return cmd.Process.Pid
}

// TestProcessesInNewNamespaces starts a sandbox-like process in a new
// network and UTS namespace (never touching the host's), runs a command
// inside them, signals the group and adopts a live process.
func TestProcessesInNewNamespaces(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to create namespaces (CI runs as root)")
	}
	sleep, err := LookPath("sleep", os.Getenv("PATH"), "")
	if err != nil {
		t.Skip("no sleep binary")
	}
	sb, err := Start(Spec{Path: sleep, Args: []string{"sleep", "60"}, NewNamespaces: syscall.CLONE_NEWNET | syscall.CLONE_NEWUTS})
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Signal(syscall.SIGKILL)
	own, _ := os.Readlink("/proc/self/ns/net")
	theirs, _ := os.Readlink(Of(sb.Pid).Net)
	if own == theirs || theirs == "" {
		t.Fatalf("sandbox network namespace: got %q, want a new one (ours is %q)", theirs, own)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	cat, err := LookPath("cat", os.Getenv("PATH"), "")
	if err != nil {
		t.Skip("no cat binary")
	}
	code, out, err := Run(ctx, Spec{Path: cat, Args: []string{"cat", "/proc/net/dev"}, Namespaces: Namespaces{Net: Of(sb.Pid).Net}}, nil)
	if err != nil || code != 0 {
		t.Fatalf("run in the sandbox: %v, exit %d: %s", err, code, out)
	}
	if lines := strings.Count(strings.TrimSpace(string(out)), "\n"); lines != 2 || !strings.Contains(string(out), "lo:") {
		t.Errorf("interfaces in the new namespace: got\n%s\nwant only lo", out)
	}
	if after, _ := os.Readlink("/proc/thread-self/ns/net"); after != own {
		t.Errorf("test thread's namespace after Run: got %q, want %q", after, own)
	}
	short, cancelShort := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancelShort()
	if _, _, err := Run(short, Spec{Path: sleep, Args: []string{"sleep", "10"}}, nil); err != context.DeadlineExceeded {
		t.Errorf("command past its deadline: got %v, want %v", err, context.DeadlineExceeded)
	}

	adopted, ok := Adopt(sb.Pid, sb.StartTime)
	if !ok {
		t.Fatal("Adopt of a live process: got false")
	}
	if _, ok := Adopt(sb.Pid, sb.StartTime+1); ok {
		t.Error("Adopt with another start time (a reused PID): got true, want false")
	}
	sb.Signal(syscall.SIGTERM)
	select {
	case <-sb.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("sandbox did not exit on SIGTERM")
	}
	if code, known := sb.ExitCode(); code != 128+int(syscall.SIGTERM) || !known {
		t.Errorf("exit code after SIGTERM: got %d (known %v), want %d", code, known, 128+int(syscall.SIGTERM))
	}
	select {
	case <-adopted.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("adopted process: exit not noticed")
	}
	if _, known := adopted.ExitCode(); known {
		t.Error("adopted process: got a known exit code, want unknown")
	}
}

// TestPauseSandbox: a sandbox starts as `sleep infinity` without the init
// helper (which costs a start of the whole portal binary), in new
// namespaces, with the pod's host name set in its own UTS namespace and
// the agent's left alone.
func TestPauseSandbox(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to create namespaces (CI runs as root)")
	}
	if sleepPath() == "" {
		t.Skip("no sleep binary")
	}
	own, _ := os.Hostname()
	sb, err := Start(Spec{Init: "/nonexistent/portal", Pause: true, Hostname: "web-0",
		NewNamespaces: syscall.CLONE_NEWNET | syscall.CLONE_NEWUTS | syscall.CLONE_NEWIPC})
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Signal(syscall.SIGKILL)
	comm, _ := os.ReadFile(fmt.Sprintf("/proc/%d/comm", sb.Pid))
	if got := strings.TrimSpace(string(comm)); got != "sleep" {
		t.Errorf("sandbox process: got %q, want sleep (no init helper)", got)
	}
	cat, err := LookPath("cat", os.Getenv("PATH"), "")
	if err != nil {
		t.Skip("no cat binary")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, out, err := Run(ctx, Spec{Path: cat, Args: []string{"cat", "/proc/sys/kernel/hostname"}, Namespaces: Of(sb.Pid)}, nil)
	if err != nil || strings.TrimSpace(string(out)) != "web-0" {
		t.Errorf("host name in the sandbox: got %q (%v), want web-0", out, err)
	}
	if after, _ := os.Hostname(); after != own {
		t.Errorf("agent's host name after the sandbox: got %q, want %q", after, own)
	}
}

// TestMain lets the test binary be its own init helper (Spec.Init), as the
// portal binary is the agent's.
func TestMain(m *testing.M) {
	if len(os.Args) > 2 && os.Args[1] == "agent" && os.Args[2] == "init" {
		if err := InitMain(os.Args[3:]); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// TestExitFile: with an exit file, the init helper reports the command's
// exit code both to its parent and in the file, where a process that
// adopted the command (an agent after a restart) reads it.
func TestExitFile(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to create mount namespaces (CI runs as root)")
	}
	sh, err := LookPath("sh", os.Getenv("PATH"), "")
	if err != nil {
		t.Skip("no sh binary")
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	for _, tc := range []struct {
		name   string
		script string
		want   int
	}{
		{"exit code", "exit 7", 7},
		{"success", "true", 0},
		{"killed by a signal", "kill -TERM $$", 128 + int(syscall.SIGTERM)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			file := filepath.Join(dir, strings.ReplaceAll(tc.name, " ", "-"))
			p, err := Start(Spec{Path: sh, Args: []string{"sh", "-c", "sleep 0.3; " + tc.script}, Init: self, ExitFile: file})
			if err != nil {
				t.Fatal(err)
			}
			adopted, ok := Adopt(p.Pid, p.StartTime)
			if !ok {
				t.Fatal("Adopt of the running command: got false")
			}
			for _, proc := range []*Process{p, adopted} {
				select {
				case <-proc.Done():
				case <-time.After(5 * time.Second):
					t.Fatal("command did not end")
				}
			}
			if code, known := p.ExitCode(); code != tc.want || !known {
				t.Errorf("parent's exit code: got %d (known %v), want %d", code, known, tc.want)
			}
			if code, known := ReadExitFile(file); code != tc.want || !known {
				t.Errorf("exit file: got %d (known %v), want %d", code, known, tc.want)
			}
		})
	}
	if _, known := ReadExitFile(filepath.Join(dir, "none")); known {
		t.Error("missing exit file: got a known code")
	}
}
