//go:build linux

package agent

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/remotecommand"
	"k8s.io/klog/v2"
	"k8s.io/streaming/pkg/httpstream"

	"portal.dev/portal/agent/container"
)

// remoteCommandV4 is the one remote command protocol the agent speaks, as
// every kubectl and the API server's stream translator offer it: stdin,
// stdout, stderr, a JSON Status on the error stream, resize for a TTY.
const remoteCommandV4 = "v4.channel.k8s.io"

// streamRequest says which streams a remote command session carries, from
// the query the API server forwards (input, output, error, tty).
type streamRequest struct {
	stdin, stdout, stderr, tty bool
}

func parseStreamRequest(r *http.Request) streamRequest {
	q := r.URL.Query()
	on := func(k string) bool { b, _ := strconv.ParseBool(q.Get(k)); return b }
	return streamRequest{stdin: on("input"), stdout: on("output"), stderr: on("error"), tty: on("tty")}
}

// commandStreams are one session's streams; those not asked for are nil.
type commandStreams struct {
	*spdySession
	stdin, stdout, stderr, errs, resize httpstream.Stream
}

// acceptStreams waits until the client has opened every stream req asks
// for, as kubelet does, or gives up after streamCreationTimeout.
func acceptStreams(s *spdySession, req streamRequest) (*commandStreams, error) {
	cs := &commandStreams{spdySession: s}
	want := map[string]bool{corev1.StreamTypeError: true, corev1.StreamTypeStdin: req.stdin,
		corev1.StreamTypeStdout: req.stdout, corev1.StreamTypeStderr: req.stderr, corev1.StreamTypeResize: req.tty}
	slots := map[string]*httpstream.Stream{corev1.StreamTypeError: &cs.errs, corev1.StreamTypeStdin: &cs.stdin,
		corev1.StreamTypeStdout: &cs.stdout, corev1.StreamTypeStderr: &cs.stderr, corev1.StreamTypeResize: &cs.resize}
	missing := 0
	for _, w := range want {
		if w {
			missing++
		}
	}
	timeout := time.NewTimer(streamCreationTimeout)
	defer timeout.Stop()
	var replies []<-chan struct{}
	for missing > 0 {
		select {
		case st := <-s.streams:
			slot, ok := slots[streamType(st)]
			if !ok || !want[streamType(st)] || *slot != nil {
				go func() { <-st.replySent; st.Reset() }()
				continue
			}
			*slot = st.Stream
			replies = append(replies, st.replySent)
			missing--
		case <-s.conn.CloseChan():
			return nil, errors.New("connection closed before the streams were opened")
		case <-timeout.C:
			return nil, fmt.Errorf("timed out after %v waiting for the client's streams", streamCreationTimeout)
		}
	}
	for _, r := range replies {
		select {
		case <-r:
		case <-s.conn.CloseChan():
			return nil, errors.New("connection closed before the streams were opened")
		}
	}
	return cs, nil
}

// openCommandSession upgrades r, a request for a remote command session
// (kind is "exec" or "attach"), and waits for the streams its query asks
// for. It returns nil when the session did not start: the request is
// answered, or the session closed and the reason logged. Otherwise the
// caller closes the session.
func openCommandSession(w http.ResponseWriter, r *http.Request, kind string) (*commandStreams, streamRequest) {
	req := parseStreamRequest(r)
	s := upgradeSPDY(w, r, []string{remoteCommandV4})
	if s == nil {
		return nil, req
	}
	cs, err := acceptStreams(s, req)
	if err != nil {
		s.close()
		klog.FromContext(r.Context()).V(2).Info("Remote command session not started", "session", kind,
			"pod", r.PathValue("namespace")+"/"+r.PathValue("pod"), "err", err)
		return nil, req
	}
	return cs, req
}

// finish reports how the command ended on the error stream, as a kubelet
// Status (kubectl exits with the code), and half-closes every stream so
// the client sees all output end.
func (cs *commandStreams) finish(code int, err error) {
	st := metav1.Status{Status: metav1.StatusSuccess}
	switch {
	case err != nil:
		st = metav1.Status{Status: metav1.StatusFailure, Message: err.Error()}
	case code != 0:
		st = metav1.Status{Status: metav1.StatusFailure, Reason: remotecommand.NonZeroExitCodeReason,
			Message: fmt.Sprintf("command terminated with non-zero exit code: exit status %d", code),
			Details: &metav1.StatusDetails{Causes: []metav1.StatusCause{
				{Type: remotecommand.ExitCodeCauseType, Message: strconv.Itoa(code)}}}}
	}
	for _, s := range []httpstream.Stream{cs.stdout, cs.stderr} {
		if s != nil {
			s.Close()
		}
	}
	data, _ := json.Marshal(st)
	cs.errs.Write(data)
	cs.errs.Close()
}

// serveExec runs a command in a running container: kubectl exec through
// the API server's pods/exec.
func (a *Agent) serveExec(w http.ResponseWriter, r *http.Request) {
	ns, name, ctr := r.PathValue("namespace"), r.PathValue("pod"), r.PathValue("container")
	command := r.URL.Query()["command"]
	if len(command) == 0 {
		writeStatus(w, http.StatusBadRequest, "you must specify at least 1 command")
		return
	}
	t, err := a.runningContainer(ns, name, ctr)
	if err != nil {
		writeStatus(w, http.StatusNotFound, err.Error())
		return
	}
	cs, req := openCommandSession(w, r, "exec")
	if cs == nil {
		return
	}
	defer cs.close()
	code, err := a.runCommand(cs, t, command, req.tty)
	cs.finish(code, err)
}

// runCommand runs command in the target container with the session's
// streams and returns its exit code. A command that is not on the
// container's PATH is reported on its output and ends with 127, as a shell
// would; a client that goes away ends the command's process group.
func (a *Agent) runCommand(cs *commandStreams, t *execTarget, command []string, tty bool) (int, error) {
	spec, err := a.commandSpec(t, command)
	if errors.Is(err, container.ErrNotFound) {
		out := cs.stderr
		if out == nil || tty {
			out = cs.stdout
		}
		if out != nil {
			fmt.Fprintf(out, "%v\n", err)
		}
		return 127, nil
	}
	if err != nil {
		return 0, err
	}
	if tty {
		return runTTY(cs, spec)
	}
	var sess container.Session
	if cs.stdout != nil {
		sess.Stdout = cs.stdout
	}
	if cs.stderr != nil {
		sess.Stderr = cs.stderr
	}
	if cs.stdin != nil {
		pr, pw, err := os.Pipe()
		if err != nil {
			return 0, err
		}
		go func() { io.Copy(pw, cs.stdin); pw.Close() }()
		sess.Stdin = pr
	}
	proc, err := container.StartSession(spec, sess)
	if sess.Stdin != nil {
		sess.Stdin.Close() // the command's copy is its own
	}
	if err != nil {
		return 0, err
	}
	return waitSession(cs, proc), nil
}

// commandSpec is how command starts inside t's container: through nsenter
// into the running process's namespaces (its mounts included), or, on a
// node without nsenter, through the init helper with the same
// namespaces and mounts the container got. Either way it joins the
// container's cgroup, so its memory and CPU count against the
// container's limits, as a runtime's exec does.
func (a *Agent) commandSpec(t *execTarget, command []string) (container.Spec, error) {
	path, err := lookPathIn(t.proc, command[0], t.env, t.dir)
	if err != nil {
		return container.Spec{}, err
	}
	if nsenter := nsenterPath(); nsenter != "" && running(t.proc) {
		pid, _ := t.proc.ID()
		args := []string{"nsenter", "--target", strconv.Itoa(pid), "--mount", "--uts", "--ipc", "--net", "--wd"}
		if t.uid != nil {
			args = append(args, "--setuid", strconv.FormatInt(*t.uid, 10))
		}
		if t.gid != nil {
			args = append(args, "--setgid", strconv.FormatInt(*t.gid, 10))
		}
		spec := container.Spec{Path: nsenter, Args: append(append(args, "--", path), command[1:]...), Env: t.env, Cgroups: t.cgroups}
		if len(t.cgroups) > 0 {
			// The init helper joins the cgroups before it execs nsenter:
			// moved after the start, a short command could be done first.
			spec.Init = a.opts.InitPath
		}
		return spec, nil
	}
	return container.Spec{Path: path, Args: command, Env: t.env, Dir: t.dir, Namespaces: t.ns, Mounts: t.mounts,
		Init: a.opts.InitPath, UID: t.uid, GID: t.gid, Cgroups: t.cgroups}, nil
}

// lookPathIn finds command as the container's own execve would: through
// the mounts and working directory of its running process (a script on a
// volume, "./run.sh" in its workingDir), which the agent's file system
// does not show; with no process to look through, from the node with dir
// as the working directory.
func lookPathIn(proc Process, command string, env []string, dir string) (string, error) {
	if running(proc) {
		pid, _ := proc.ID()
		return container.LookPathIn(pid, command, lookupEnv(env, "PATH"))
	}
	return container.LookPath(command, lookupEnv(env, "PATH"), dir)
}

// waitSession waits for the command to end, or for the client to go away,
// then kills what is left of its process group, and returns its exit code.
func waitSession(cs *commandStreams, proc *container.Process) int {
	select {
	case <-proc.Done():
	case <-cs.conn.CloseChan():
		proc.Signal(syscall.SIGKILL)
		<-proc.Done()
	}
	code, _ := proc.ExitCode()
	return code
}

// runTTY runs spec on a new pseudo-terminal: the client's stdin goes to it,
// its output to the client's stdout, and resize events set its size.
func runTTY(cs *commandStreams, spec container.Spec) (int, error) {
	master, slave, err := container.OpenPTY()
	if err != nil {
		return 0, err
	}
	defer master.Close()
	if cs.resize != nil {
		go decodeResizes(cs.resize, func(w, h uint16) { container.SetSize(master, w, h) })
	}
	proc, err := container.StartSession(spec, container.Session{Stdin: slave, Stdout: slave, Stderr: slave, TTY: true})
	slave.Close()
	if err != nil {
		return 0, err
	}
	if cs.stdin != nil {
		go io.Copy(master, cs.stdin)
	}
	copied := make(chan struct{})
	go func() {
		defer close(copied)
		if cs.stdout != nil {
			io.Copy(cs.stdout, master)
		} else {
			io.Copy(io.Discard, master)
		}
	}()
	code := waitSession(cs, proc)
	// The terminal ends when its last holder closes it; a child left in
	// the background may hold it for good.
	master.SetReadDeadline(time.Now().Add(container.OutputGrace))
	<-copied
	return code, nil
}

// decodeResizes applies the client's resize events (JSON objects, one
// after another, as kubectl sends them) until the stream ends.
func decodeResizes(r io.Reader, set func(width, height uint16)) {
	dec := json.NewDecoder(r)
	for {
		var size struct{ Width, Height uint16 }
		if dec.Decode(&size) != nil {
			return
		}
		set(size.Width, size.Height)
	}
}
