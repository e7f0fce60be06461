//go:build linux

package container

import (
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// InitMain is the init helper, `portal agent init [--cgroup PROCS]...
// [--mount SRC:DST]... [--hostname NAME] [--uid N] [--gid N] [--exit-file FILE] (--pause | --
// PATH ARGV...)`. It runs as the first program in a process's fresh mount
// namespace: it joins each cgroup whose cgroup.procs file is PROCS, stops
// mount propagation back to the node, bind-mounts each
// SRC over DST, sets the host name (in a sandbox's new UTS namespace),
// drops to the user, then execs the command, or with --pause holds the
// namespaces until killed. With --exit-file it runs the command as its
// child instead and writes its exit code to FILE. It returns only on
// error.
func InitMain(args []string) error {
	var (
		mounts   [][2]string
		hostname string
		uid, gid = -1, -1
		pause    bool
		exitFile string
		argv     []string
	)
	for i := 0; i < len(args); i++ {
		next := func() (string, error) {
			if i+1 >= len(args) {
				return "", fmt.Errorf("%s needs a value", args[i])
			}
			i++
			return args[i], nil
		}
		var v string
		var err error
		switch a := args[i]; a {
		case "--mount":
			if v, err = next(); err == nil {
				src, dst, ok := strings.Cut(v, ":")
				if !ok {
					return fmt.Errorf("--mount %q: want SRC:DST", v)
				}
				mounts = append(mounts, [2]string{src, dst})
			}
		case "--hostname":
			hostname, err = next()
		case "--cgroup":
			if v, err = next(); err == nil {
				err = joinCgroup(v)
			}
		case "--uid":
			if v, err = next(); err == nil {
				uid, err = strconv.Atoi(v)
			}
		case "--gid":
			if v, err = next(); err == nil {
				gid, err = strconv.Atoi(v)
			}
		case "--pause":
			pause = true
		case "--exit-file":
			exitFile, err = next()
		case "--":
			argv = args[i+1:]
			i = len(args)
		default:
			return fmt.Errorf("unknown argument %q", a)
		}
		if err != nil {
			return err
		}
	}
	if len(mounts) > 0 {
		// The new mount namespace is a copy whose mounts still propagate
		// to the node's; make it a receiver only before mounting.
		if err := unix.Mount("", "/", "", unix.MS_SLAVE|unix.MS_REC, ""); err != nil {
			return fmt.Errorf("make / a slave mount: %w", err)
		}
	}
	for _, m := range mounts {
		if err := unix.Mount(m[0], m[1], "", unix.MS_BIND, ""); err != nil {
			return fmt.Errorf("bind-mount %s over %s: %w", m[0], m[1], err)
		}
	}
	if hostname != "" {
		if err := unix.Sethostname([]byte(hostname)); err != nil {
			return fmt.Errorf("set host name %q: %w", hostname, err)
		}
	}
	if pause {
		return holdNamespaces()
	}
	if len(argv) < 2 {
		return fmt.Errorf("no command after --")
	}
	if exitFile != "" {
		return superviseExit(argv, uid, gid, exitFile)
	}
	if gid >= 0 {
		if err := syscall.Setgroups(nil); err != nil {
			return err
		}
		if err := syscall.Setgid(gid); err != nil {
			return fmt.Errorf("setgid %d: %w", gid, err)
		}
	}
	if uid >= 0 {
		if err := syscall.Setuid(uid); err != nil {
			return fmt.Errorf("setuid %d: %w", uid, err)
		}
	}
	err := syscall.Exec(argv[0], argv[1:], os.Environ())
	return fmt.Errorf("exec %s: %w", argv[0], err)
}

// joinCgroup moves the helper into the cgroup whose cgroup.procs file is
// procs ("0" is the writer itself).
func joinCgroup(procs string) error {
	if err := os.WriteFile(procs, []byte("0"), 0o644); err != nil {
		return fmt.Errorf("join cgroup: %w", err)
	}
	return nil
}

// holdNamespaces keeps the sandbox's namespaces alive: as `sleep infinity`
// when the node has sleep (a few hundred kilobytes instead of a Go
// runtime), else by waiting here for a signal.
func holdNamespaces() error {
	for _, p := range []string{"/usr/bin/sleep", "/bin/sleep"} {
		if _, err := os.Stat(p); err == nil {
			return syscall.Exec(p, []string{"sleep", "infinity"}, nil)
		}
	}
	if p, err := exec.LookPath("sleep"); err == nil {
		return syscall.Exec(p, []string{"sleep", "infinity"}, nil)
	}
	c := make(chan os.Signal, 1)
	signal.Notify(c, syscall.SIGTERM, syscall.SIGINT)
	<-c
	return nil
}

// superviseExit runs argv (the path, then argv[0]...) as the user, waits
// for it, writes its exit code (128 + the signal when a signal ended it,
// as container runtimes report it) to path and exits with that code, so
// the agent that started the helper sees the same code as one that
// adopted it.
func superviseExit(argv []string, uid, gid int, path string) error {
	// Opened first: the helper stays root, the command may not.
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o600)
	if err != nil {
		return fmt.Errorf("exit file: %w", err)
	}
	// The agent signals the whole process group, the command included;
	// the helper outlives it to record how it ended. Caught, not ignored:
	// an ignored signal would stay ignored in the command.
	signal.Notify(make(chan os.Signal, 1), syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP, syscall.SIGQUIT)
	cmd := &exec.Cmd{Path: argv[0], Args: argv[1:], Env: os.Environ(), Stdin: os.Stdin, Stdout: os.Stdout, Stderr: os.Stderr}
	if uid >= 0 || gid >= 0 {
		cred := &syscall.Credential{Uid: uint32(os.Getuid()), Gid: uint32(os.Getgid()), Groups: []uint32{}}
		if uid >= 0 {
			cred.Uid = uint32(uid)
		}
		if gid >= 0 {
			cred.Gid = uint32(gid)
		}
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
	}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("exec %s: %w", argv[0], err)
	}
	// The helper shares the command's cgroup and memory limit; it must
	// not be what the out-of-memory killer picks, or the command would
	// run on unsupervised. Lowered after the fork, so the command keeps
	// its own score. Best effort: without the right it stays as it was.
	os.WriteFile("/proc/self/oom_score_adj", []byte("-998"), 0o644)
	cmd.Wait()
	code := exitCode(cmd.ProcessState)
	fmt.Fprintf(f, "%d\n", code)
	f.Close()
	os.Exit(code)
	return nil
}
