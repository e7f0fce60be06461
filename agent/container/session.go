//go:build linux

package container

import (
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// Session is the I/O of an interactive command (kubectl exec): the
// agent's ends of its standard streams.
type Session struct {
	// Stdin is read by the command; nil gives it /dev/null.
	Stdin *os.File
	// Stdout and Stderr receive its output; copied until the command and
	// whatever it left behind close them, or OutputGrace after it exits.
	Stdout, Stderr io.Writer
	// TTY makes the command lead a new session whose controlling terminal
	// is Stdin (a pty's slave side, also its Stdout and Stderr).
	TTY bool
}

// OutputGrace bounds how long an exited command's children may hold its
// output pipes open before its session ends anyway: a shell that leaves
// `sleep 100 &` behind must not keep kubectl waiting.
const OutputGrace = time.Second

// StartSession starts spec's command with the session's streams. Its
// process group is its own (with TTY, its session too), so Signal reaches
// what it forks.
func StartSession(spec Spec, s Session) (*Process, error) {
	path, args := spec.Path, spec.Args
	attr := &syscall.SysProcAttr{Setpgid: !s.TTY, Setsid: s.TTY, Setctty: s.TTY}
	if spec.Init != "" {
		path, args = spec.Init, initArgs(spec)
		attr.Cloneflags |= unix.CLONE_NEWNS
	} else if spec.UID != nil {
		attr.Credential = &syscall.Credential{Uid: uint32(*spec.UID)}
		if spec.GID != nil {
			attr.Credential.Gid = uint32(*spec.GID)
		}
	}
	cmd := &exec.Cmd{Path: path, Args: args, Env: spec.Env, Dir: spec.Dir, SysProcAttr: attr, WaitDelay: OutputGrace}
	if s.Stdin != nil {
		cmd.Stdin = s.Stdin
	}
	cmd.Stdout, cmd.Stderr = s.Stdout, s.Stderr
	if err := inNamespaces(spec.Namespaces, cmd.Start); err != nil {
		return nil, err
	}
	return joinAfterStart(track(cmd), spec)
}

// OpenPTY opens a new pseudo-terminal: the master, which the agent reads
// and writes (with deadlines: it is not put in blocking mode), and the
// slave, the command's terminal.
func OpenPTY() (master, slave *os.File, err error) {
	master, err = os.OpenFile("/dev/ptmx", os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		return nil, nil, err
	}
	var n int
	err = control(master, func(fd int) error {
		if err := unix.IoctlSetPointerInt(fd, unix.TIOCSPTLCK, 0); err != nil {
			return fmt.Errorf("unlock pty: %w", err)
		}
		n, err = unix.IoctlGetInt(fd, unix.TIOCGPTN)
		return err
	})
	if err == nil {
		slave, err = os.OpenFile(fmt.Sprintf("/dev/pts/%d", n), os.O_RDWR|unix.O_NOCTTY, 0)
	}
	if err != nil {
		master.Close()
		return nil, nil, err
	}
	return master, slave, nil
}

// SetSize sets the terminal size of the pty whose master is f.
func SetSize(f *os.File, width, height uint16) error {
	return control(f, func(fd int) error {
		return unix.IoctlSetWinsize(fd, unix.TIOCSWINSZ, &unix.Winsize{Col: width, Row: height})
	})
}

func control(f *os.File, op func(fd int) error) error {
	rc, err := f.SyscallConn()
	if err != nil {
		return err
	}
	var opErr error
	if err := rc.Control(func(fd uintptr) { opErr = op(int(fd)) }); err != nil {
		return err
	}
	return opErr
}

// DialIn opens a TCP connection to addr from inside the network namespace
// netns (a /proc/PID/ns/net path; "" dials from the agent's own). The
// socket is made by a thread that entered netns, so it belongs there for
// its whole life.
func DialIn(ctx context.Context, netns, addr string) (net.Conn, error) {
	var d net.Dialer
	var c net.Conn
	err := inNamespaces(Namespaces{Net: netns}, func() (err error) {
		c, err = d.DialContext(ctx, "tcp", addr)
		return err
	})
	return c, err
}
