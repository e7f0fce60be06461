//go:build linux

package agent

import (
	"io"
	"net/http"
	"os"
	"sync"
	"time"

	"portal.dev/portal/agent/container"
)

// heldStdin is the agent's end of the standard input of a container
// started with stdin: true: a pipe's write end, or with tty: true the
// pty's master, whose output the agent copies to the container's log.
// kubectl attach writes to it. It is lost when the agent restarts: the
// container then reads end of file (a tty container is hung up).
type heldStdin struct {
	mu     sync.Mutex
	w      *os.File // nil once closed
	master *os.File // the pty, for resize; nil without tty
	once   bool     // stdinOnce: closed when the first attach's input ends
}

// holdStdin gives spec a stdin the agent keeps (and with tty a terminal,
// its output to log) and returns the agent's end; call started once the
// process has started or failed to.
func holdStdin(spec *container.Spec, tty, once bool, log *os.File) (*heldStdin, func(Process, error), error) {
	if !tty {
		r, w, err := os.Pipe()
		if err != nil {
			return nil, nil, err
		}
		h := &heldStdin{w: w, once: once}
		spec.Stdin = r
		return h, func(p Process, err error) {
			r.Close()
			if err != nil {
				h.close()
				return
			}
			go func() { <-p.Done(); h.close() }()
		}, nil
	}
	master, slave, err := container.OpenPTY()
	if err != nil {
		return nil, nil, err
	}
	out, err := os.OpenFile(log.Name(), os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		master.Close()
		slave.Close()
		return nil, nil, err
	}
	h := &heldStdin{w: master, master: master, once: once}
	spec.Stdin, spec.Stdout, spec.Stderr, spec.TTY = slave, slave, slave, true
	return h, func(_ Process, err error) {
		slave.Close()
		if err != nil {
			out.Close()
			h.close()
			return
		}
		// The terminal's output ends (EIO) once the container and all it
		// started have closed it.
		go func() { io.Copy(out, master); out.Close(); h.close() }()
	}, nil
}

// Write passes p to the container's stdin, as an attached client types
// it; once the stdin is closed it fails with os.ErrClosed.
func (h *heldStdin) Write(p []byte) (int, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.w == nil {
		return 0, os.ErrClosed
	}
	return h.w.Write(p)
}

func (h *heldStdin) resize(width, height uint16) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.w != nil && h.master != nil {
		container.SetSize(h.master, width, height)
	}
}

func (h *heldStdin) close() {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.w != nil {
		h.w.Close()
		h.w = nil
	}
}

// serveAttach connects the client to a running container: kubectl attach.
// Its input goes to the container's held stdin; the container's output
// from now on (its log) comes back until it exits or the client leaves.
func (a *Agent) serveAttach(w http.ResponseWriter, r *http.Request) {
	ns, name, ctr := r.PathValue("namespace"), r.PathValue("pod"), r.PathValue("container")
	t, err := a.runningContainer(ns, name, ctr)
	if err != nil {
		writeStatus(w, http.StatusNotFound, err.Error())
		return
	}
	log, err := os.Open(t.log)
	if err != nil {
		writeStatus(w, http.StatusInternalServerError, err.Error())
		return
	}
	defer log.Close()
	log.Seek(0, io.SeekEnd)
	cs, _ := openCommandSession(w, r, "attach")
	if cs == nil {
		return
	}
	defer cs.close()
	if cs.stdin != nil && t.stdin != nil {
		go func() {
			io.Copy(t.stdin, cs.stdin)
			if t.stdin.once {
				t.stdin.close()
			}
		}()
	}
	if cs.resize != nil && t.stdin != nil {
		go decodeResizes(cs.resize, t.stdin.resize)
	}
	cs.finish(0, followLog(cs, t.proc, log))
}

// attachPoll is how often an attached session looks for new output.
const attachPoll = 50 * time.Millisecond

// followLog copies what is appended to log to the client's stdout until
// the process exits (then the rest) or the client goes away.
func followLog(cs *commandStreams, proc Process, log *os.File) error {
	out := io.Writer(io.Discard)
	if cs.stdout != nil {
		out = cs.stdout
	} else if cs.stderr != nil {
		out = cs.stderr
	}
	tick := time.NewTicker(attachPoll)
	defer tick.Stop()
	for {
		if _, err := io.Copy(out, log); err != nil {
			return nil // the client went away
		}
		select {
		case <-proc.Done():
			// Whatever a tty container wrote last reaches the log after
			// its exit; one more look.
			time.Sleep(attachPoll)
			io.Copy(out, log)
			return nil
		case <-cs.conn.CloseChan():
			return nil
		case <-tick.C:
		}
	}
}
