//go:build linux

// Package container runs a pod's processes: the sandbox process that holds
// the pod's network, UTS and IPC namespaces, the containers that join them,
// and one-off commands (exec probes, preStop hooks, `ip` inside a pod). A
// process is a plain child of the agent in its own process group, so
// signals reach everything it forks; Adopt takes back a process an earlier
// agent started. It owns no state on disk and knows nothing of the API.
//
// Go cannot run code between fork and exec, and a multi-threaded process
// cannot enter another mount namespace, so each container starts through
// the init helper (`portal agent init`, see InitMain) in a fresh mount
// namespace of its own: the helper bind-mounts the pod's resolv.conf, hosts
// and hostname files, drops to the container's user, and execs the
// command. Network, UTS and IPC namespaces are entered by the forking
// thread (setns on a locked OS thread), which the child inherits. The
// sandbox needs no mounts: it is `sleep infinity` started directly, its
// host name set from a thread that entered its UTS namespace.
package container

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// Namespaces are the namespace files (e.g. /proc/PID/ns/net) a process
// joins; "" keeps the agent's own.
type Namespaces struct {
	Net, UTS, IPC string
}

// Of returns the namespaces of process pid.
func Of(pid int) Namespaces {
	p := fmt.Sprintf("/proc/%d/ns/", pid)
	return Namespaces{Net: p + "net", UTS: p + "uts", IPC: p + "ipc"}
}

// Mount is a file bind-mounted over Target inside the process's mount
// namespace.
type Mount struct {
	Source, Target string
}

// Spec is one process to start.
type Spec struct {
	// Path is the executable; Args its argv (Args[0] included).
	Path string
	Args []string
	Env  []string
	Dir  string
	// Stdout and Stderr receive the output; *os.File avoids copying
	// goroutines.
	Stdout, Stderr io.Writer
	// Stdin, when set, is the command's standard input (a container with
	// stdin: true, which the agent keeps open for kubectl attach).
	Stdin *os.File
	// TTY makes the command lead a new session with Stdin, a pty's slave
	// side, as its controlling terminal.
	TTY        bool
	Namespaces Namespaces
	// Mounts need Init.
	Mounts []Mount
	// Init is the init helper's executable (the portal binary); "" runs
	// Path directly, without a mount namespace of its own.
	Init string
	// Hostname set in a new UTS namespace (sandbox only).
	Hostname string
	// NewNamespaces are clone flags for namespaces the process creates
	// (the sandbox: CLONE_NEWNET|CLONE_NEWUTS|CLONE_NEWIPC).
	NewNamespaces uintptr
	// UID and GID, when not nil, are the user the command runs as.
	UID, GID *int64
	// Pause makes the init helper hold the namespaces instead of running
	// Path (the sandbox).
	Pause bool
	// ExitFile, with Init, keeps the init helper as the command's parent:
	// it writes the command's exit code there when it ends. An agent that
	// adopts the process after a restart is not its parent and learns the
	// code only from this file. It costs a helper process while the
	// command runs.
	ExitFile string
	// Cgroups are the cgroup.procs files of the cgroups the process runs
	// in. With Init, the helper joins them before it does anything else,
	// so the command and all it forks are inside from their first
	// instruction; without, the process is moved right after it starts.
	Cgroups []string
}

// Process is a started or adopted process and its process group.
type Process struct {
	Pid       int
	StartTime uint64 // /proc/PID/stat starttime, to tell a reused PID apart

	done     chan struct{}
	mu       sync.Mutex
	code     int
	codeSure bool
}

// ErrNotFound means an executable is not on the container's PATH.
var ErrNotFound = errors.New("executable file not found in $PATH")

// LookPath finds file in path (a PATH value) as execve would for a
// container, without the agent's own PATH.
func LookPath(file, path, dir string) (string, error) {
	return lookPath(file, path, dir, isExecutable)
}

// LookPathIn is LookPath as process pid sees the file system: through its
// mounts (a pod's volumes, or what the container mounted itself), which
// the agent's mount namespace does not have, with a relative name taken
// from the process's working directory. Absolute symbolic links resolve
// inside that view too.
func LookPathIn(pid int, file, path string) (string, error) {
	proc := "/proc/" + strconv.Itoa(pid)
	root, err := os.OpenFile(proc+"/root", unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return "", fmt.Errorf("exec: %q: %w", file, err)
	}
	defer root.Close()
	cwd, err := os.Readlink(proc + "/cwd")
	if err != nil {
		return "", fmt.Errorf("exec: %q: %w", file, err)
	}
	return lookPath(file, path, cwd, func(p string) bool { return executableIn(root, proc+"/root", p) })
}

func lookPath(file, path, dir string, executable func(string) bool) (string, error) {
	if strings.Contains(file, "/") {
		p := file
		if !strings.HasPrefix(p, "/") && dir != "" {
			p = dir + "/" + p
		}
		if executable(p) {
			return file, nil
		}
		return "", fmt.Errorf("exec: %q: no such file or executable", file)
	}
	for _, d := range strings.Split(path, ":") {
		if d == "" {
			d = "."
		}
		if !strings.HasPrefix(d, "/") && dir != "" {
			d = dir + "/" + d
		}
		if p := d + "/" + file; executable(p) {
			return p, nil
		}
	}
	return "", fmt.Errorf("exec: %q: %w", file, ErrNotFound)
}

func isExecutable(p string) bool {
	st, err := os.Stat(p)
	return err == nil && !st.IsDir() && st.Mode()&0o111 != 0
}

// executableIn says whether p (an absolute path in the process's view) is
// an executable file under root, the process's /proc/PID/root opened as
// rootPath. openat2's RESOLVE_IN_ROOT keeps ".." and absolute links
// inside root; a kernel without openat2 (before 5.6) falls back to a
// plain stat through rootPath.
func executableIn(root *os.File, rootPath, p string) bool {
	fd, err := unix.Openat2(int(root.Fd()), strings.TrimLeft(p, "/"), &unix.OpenHow{
		Flags: unix.O_PATH | unix.O_CLOEXEC, Resolve: unix.RESOLVE_IN_ROOT | unix.RESOLVE_NO_MAGICLINKS})
	if errors.Is(err, unix.ENOSYS) {
		return isExecutable(rootPath + "/" + strings.TrimLeft(p, "/"))
	}
	if err != nil {
		return false
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	if unix.Fstat(fd, &st) != nil {
		return false
	}
	return st.Mode&unix.S_IFMT != unix.S_IFDIR && st.Mode&0o111 != 0
}

// Start starts the process described by spec.
func Start(spec Spec) (*Process, error) {
	if spec.Pause {
		if sleep := sleepPath(); sleep != "" {
			return startPause(spec, sleep)
		}
	}
	path, args := spec.Path, spec.Args
	attr := &syscall.SysProcAttr{Setpgid: !spec.TTY, Setsid: spec.TTY, Setctty: spec.TTY, Cloneflags: spec.NewNamespaces}
	if spec.Init != "" {
		path = spec.Init
		args = initArgs(spec)
		attr.Cloneflags |= unix.CLONE_NEWNS
	} else if spec.UID != nil {
		attr.Credential = &syscall.Credential{Uid: uint32(*spec.UID)}
		if spec.GID != nil {
			attr.Credential.Gid = uint32(*spec.GID)
		}
	}
	cmd := &exec.Cmd{Path: path, Args: args, Env: spec.Env, Dir: spec.Dir,
		Stdout: spec.Stdout, Stderr: spec.Stderr, SysProcAttr: attr}
	if spec.Stdin != nil {
		cmd.Stdin = spec.Stdin
	}
	if err := inNamespaces(spec.Namespaces, cmd.Start); err != nil {
		return nil, err
	}
	return joinAfterStart(track(cmd), spec)
}

// joinAfterStart moves a process started without the init helper into
// spec's cgroups. What it forks, or runs, before the move stays outside:
// callers that need it counted from the start use the init helper. A
// process that has already ended has nothing left to move.
func joinAfterStart(p *Process, spec Spec) (*Process, error) {
	if spec.Init != "" {
		return p, nil // the helper joined them itself
	}
	for _, procs := range spec.Cgroups {
		err := os.WriteFile(procs, []byte(strconv.Itoa(p.Pid)), 0o644)
		if errors.Is(err, syscall.ESRCH) {
			return p, nil
		}
		if err != nil {
			p.Signal(syscall.SIGKILL)
			<-p.Done()
			return nil, fmt.Errorf("join cgroup: %w", err)
		}
	}
	return p, nil
}

// startPause starts a sandbox as `sleep infinity` in its new namespaces
// and sets its host name from here (setns into a UTS namespace works from
// a multi-threaded process; only mount namespaces need the init helper).
// The init helper would cost a start of the whole portal binary per pod.
func startPause(spec Spec, sleep string) (*Process, error) {
	cmd := &exec.Cmd{Path: sleep, Args: []string{"sleep", "infinity"}, Env: []string{}, Stdout: spec.Stdout, Stderr: spec.Stderr,
		SysProcAttr: &syscall.SysProcAttr{Setpgid: true, Cloneflags: spec.NewNamespaces}}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	p := track(cmd)
	if spec.Hostname != "" && spec.NewNamespaces&unix.CLONE_NEWUTS != 0 {
		uts := Namespaces{UTS: fmt.Sprintf("/proc/%d/ns/uts", p.Pid)}
		if err := inNamespaces(uts, func() error { return unix.Sethostname([]byte(spec.Hostname)) }); err != nil {
			p.Signal(syscall.SIGKILL)
			<-p.Done()
			return nil, fmt.Errorf("set host name %q: %w", spec.Hostname, err)
		}
	}
	return p, nil
}

// sleepPath is the node's sleep, which the sandbox runs as.
var sleepPath = sync.OnceValue(func() string {
	for _, p := range []string{"/usr/bin/sleep", "/bin/sleep"} {
		if isExecutable(p) {
			return p
		}
	}
	return ""
})

// track returns the Process of a started cmd and reaps it when it exits.
func track(cmd *exec.Cmd) *Process {
	p := &Process{Pid: cmd.Process.Pid, done: make(chan struct{})}
	p.StartTime, _ = startTime(p.Pid)
	go func() {
		err := cmd.Wait()
		code := 0
		var ee *exec.ExitError
		switch {
		case errors.As(err, &ee):
			code = exitCode(ee.ProcessState)
		case errors.Is(err, exec.ErrWaitDelay):
			// It exited; a child it left holds its output (StartSession).
			code = exitCode(cmd.ProcessState)
		case err != nil:
			code = 128
		}
		p.exit(code, true)
	}()
	return p
}

// initArgs is the init helper's command line for spec.
func initArgs(spec Spec) []string {
	args := []string{spec.Init, "agent", "init"}
	for _, c := range spec.Cgroups {
		args = append(args, "--cgroup", c)
	}
	for _, m := range spec.Mounts {
		args = append(args, "--mount", m.Source+":"+m.Target)
	}
	if spec.Hostname != "" {
		args = append(args, "--hostname", spec.Hostname)
	}
	if spec.UID != nil {
		args = append(args, "--uid", strconv.FormatInt(*spec.UID, 10))
	}
	if spec.GID != nil {
		args = append(args, "--gid", strconv.FormatInt(*spec.GID, 10))
	}
	if spec.Pause {
		return append(args, "--pause")
	}
	if spec.ExitFile != "" {
		args = append(args, "--exit-file", spec.ExitFile)
	}
	return append(append(args, "--", spec.Path), spec.Args...)
}

func exitCode(ps *os.ProcessState) int {
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		// As container runtimes report it: 128 + the signal.
		return 128 + int(ws.Signal())
	}
	return ps.ExitCode()
}

func (p *Process) exit(code int, sure bool) {
	p.mu.Lock()
	p.code, p.codeSure = code, sure
	p.mu.Unlock()
	close(p.done)
}

// ID is the process's PID and start time.
func (p *Process) ID() (pid int, start uint64) { return p.Pid, p.StartTime }

// Done is closed when the process has exited.
func (p *Process) Done() <-chan struct{} { return p.done }

// ExitCode is the exit code once Done is closed; known is false for an
// adopted process, whose status went to its real parent.
func (p *Process) ExitCode() (code int, known bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.code, p.codeSure
}

// ReadExitFile returns the exit code an init helper wrote to path (see
// Spec.ExitFile); known is false when it wrote none.
func ReadExitFile(path string) (code int, known bool) {
	data, err := os.ReadFile(path)
	if err != nil {
		return 0, false
	}
	code, err = strconv.Atoi(strings.TrimSpace(string(data)))
	return code, err == nil
}

// Signal sends sig to the process's whole group.
func (p *Process) Signal(sig syscall.Signal) error {
	err := unix.Kill(-p.Pid, sig)
	if errors.Is(err, unix.ESRCH) {
		return nil
	}
	return err
}

// GroupGone says whether no process of the group is left.
func (p *Process) GroupGone() bool {
	return errors.Is(unix.Kill(-p.Pid, 0), unix.ESRCH)
}

// Adopt takes back process pid started by an earlier agent, if it still
// runs with the same start time. Its exit is noticed by polling.
func Adopt(pid int, start uint64) (*Process, bool) {
	if !Alive(pid, start) {
		return nil, false
	}
	p := &Process{Pid: pid, StartTime: start, done: make(chan struct{})}
	go func() {
		t := time.NewTicker(250 * time.Millisecond)
		defer t.Stop()
		for range t.C {
			if !Alive(pid, start) {
				p.exit(0, false)
				return
			}
		}
	}()
	return p, true
}

// Alive says whether pid runs (and is not a zombie) with start time start.
func Alive(pid int, start uint64) bool {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	state, st, ok := parseStat(string(data))
	return ok && st == start && state != "Z" && state != "X"
}

func startTime(pid int) (uint64, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	_, st, ok := parseStat(string(data))
	if !ok {
		return 0, fmt.Errorf("parse /proc/%d/stat", pid)
	}
	return st, nil
}

// parseStat returns the state and starttime (field 22) of a /proc/PID/stat
// line; the command name in parentheses may hold spaces.
func parseStat(s string) (state string, start uint64, ok bool) {
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return "", 0, false
	}
	f := strings.Fields(s[i+1:])
	// f[0] is field 3 (state); starttime is field 22.
	if len(f) < 20 {
		return "", 0, false
	}
	st, err := strconv.ParseUint(f[19], 10, 64)
	return f[0], st, err == nil
}

// inNamespaces runs f on an OS thread that has joined ns, so a process f
// forks starts inside them. The thread returns to the agent's namespaces
// afterwards; if it cannot, it stays locked and the runtime discards it.
func inNamespaces(ns Namespaces, f func() error) error {
	if ns == (Namespaces{}) {
		return f()
	}
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		type entered struct {
			orig int
			kind int
		}
		var done []entered
		restore := func() bool {
			ok := true
			for i := len(done) - 1; i >= 0; i-- {
				if unix.Setns(done[i].orig, done[i].kind) != nil {
					ok = false
				}
				unix.Close(done[i].orig)
			}
			return ok
		}
		err := func() error {
			for _, n := range []struct {
				path, self string
				kind       int
			}{{ns.Net, "net", unix.CLONE_NEWNET}, {ns.UTS, "uts", unix.CLONE_NEWUTS}, {ns.IPC, "ipc", unix.CLONE_NEWIPC}} {
				if n.path == "" {
					continue
				}
				orig, err := unix.Open("/proc/thread-self/ns/"+n.self, unix.O_RDONLY|unix.O_CLOEXEC, 0)
				if err != nil {
					return err
				}
				fd, err := unix.Open(n.path, unix.O_RDONLY|unix.O_CLOEXEC, 0)
				if err != nil {
					unix.Close(orig)
					return fmt.Errorf("open %s: %w", n.path, err)
				}
				err = unix.Setns(fd, n.kind)
				unix.Close(fd)
				if err != nil {
					unix.Close(orig)
					return fmt.Errorf("enter %s: %w", n.path, err)
				}
				done = append(done, entered{orig, n.kind})
			}
			return f()
		}()
		if restore() {
			runtime.UnlockOSThread()
		}
		errc <- err
	}()
	return <-errc
}

// Run runs a one-off command (an exec probe, a hook, `ip` in a pod) and
// returns its exit code and combined output. When ctx ends first the
// process group is killed and ctx's error returned.
func Run(ctx context.Context, spec Spec, stdin []byte) (int, []byte, error) {
	var out bytes.Buffer
	w := &lockedWriter{w: &out}
	spec.Stdout, spec.Stderr = w, w
	if stdin != nil {
		r, wr, err := os.Pipe()
		if err != nil {
			return 0, nil, err
		}
		defer r.Close()
		go func() { wr.Write(stdin); wr.Close() }()
		return run(ctx, spec, r, w, &out)
	}
	return run(ctx, spec, nil, w, &out)
}

func run(ctx context.Context, spec Spec, stdin *os.File, w *lockedWriter, out *bytes.Buffer) (int, []byte, error) {
	path, args := spec.Path, spec.Args
	attr := &syscall.SysProcAttr{Setpgid: true}
	if spec.Init != "" {
		path, args = spec.Init, initArgs(spec)
		attr.Cloneflags |= unix.CLONE_NEWNS
	}
	cmd := &exec.Cmd{Path: path, Args: args, Env: spec.Env, Dir: spec.Dir, Stdout: w, Stderr: w, SysProcAttr: attr}
	if stdin != nil {
		cmd.Stdin = stdin
	}
	if err := inNamespaces(spec.Namespaces, cmd.Start); err != nil {
		return 0, nil, err
	}
	waited := make(chan error, 1)
	go func() { waited <- cmd.Wait() }()
	select {
	case err := <-waited:
		w.mu.Lock()
		defer w.mu.Unlock()
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			return exitCode(ee.ProcessState), bytes.Clone(out.Bytes()), nil
		}
		return 0, bytes.Clone(out.Bytes()), err
	case <-ctx.Done():
		unix.Kill(-cmd.Process.Pid, unix.SIGKILL)
		<-waited
		return -1, nil, ctx.Err()
	}
}

type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}
