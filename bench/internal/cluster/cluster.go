// Package cluster starts `portal server` for a benchmark, with only the
// API and the controllers, and fills it with Services and ready Pods on
// nodes that run no agent: the bench writes the Pods' status as an agent
// would.
package cluster

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"portal.dev/portal/bench/internal/host"
)

// Server is a running `portal server` with only the API and controllers.
type Server struct {
	// Dir is the server's data directory; its log is Dir/server.log.
	Dir string
	// Port is the API's port on 127.0.0.1, free when the server started.
	Port int
	cmd  *exec.Cmd
	log  *os.File
}

// Start runs bin as `portal server` on the data directory dir, pinned to
// the CPUs core names (taskset -c), and waits until its API is ready. A
// node that misses heartbeats stays Ready for an hour: the nodes Fill
// makes run no agent.
func Start(bin, dir, core string) (*Server, error) {
	port, err := host.FreePort()
	if err != nil {
		return nil, err
	}
	f, err := os.OpenFile(filepath.Join(dir, "server.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command("taskset", "-c", core, bin, "server", "--data-dir", dir, "--secure-port", strconv.Itoa(port),
		"--disable", "dns,proxy,agent,ingress", "--node-monitor-grace-period", "1h")
	cmd.Stdout, cmd.Stderr = f, f
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		f.Close()
		return nil, err
	}
	s := &Server{Dir: dir, Port: port, cmd: cmd, log: f}
	if err := host.WaitHTTP(fmt.Sprintf("https://127.0.0.1:%d/readyz", port), 90*time.Second); err != nil {
		s.Stop()
		return nil, err
	}
	return s, nil
}

// PID is the server's process id.
func (s *Server) PID() int { return s.cmd.Process.Pid }

// Stop ends the server and waits for it to exit.
func (s *Server) Stop() {
	s.cmd.Process.Signal(syscall.SIGTERM)
	s.cmd.Wait()
	s.log.Close()
}

// Config is the admin's client configuration for this start of the
// server (the port changes with each start), without client-side rate
// limits.
func (s *Server) Config() (*rest.Config, error) {
	cfg, err := clientcmd.BuildConfigFromFlags("", filepath.Join(s.Dir, "admin.kubeconfig"))
	if err != nil {
		return nil, err
	}
	cfg.Host = fmt.Sprintf("https://127.0.0.1:%d", s.Port)
	cfg.QPS, cfg.Burst = 1e6, 1e6
	return cfg, nil
}
