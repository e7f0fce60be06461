// Command workloads benchmarks the workload controllers of issue #17:
//
//   - scale: a Deployment behind a Service scaled from 0 to N replicas
//     (1,000) across 10 nodes through the scale subresource, as `kubectl
//     scale` does; the time until every pod exists, is scheduled, is ready,
//     and until the Service's EndpointSlices hold every pod as ready, and
//     the server's CPU per pod created;
//   - bare: the same number of pods created by the bench itself, with no
//     workload controller, timed the same way: the reference that tells the
//     controllers' share from the API server's and the scheduler's;
//   - anchor: in the same run, before and after, Service creates through
//     the API (selector-less, so no controller acts on them), and the
//     server's CPU per create;
//   - rollout: a Deployment of 100 replicas (maxSurge 25%) whose template
//     changes; the time from the change until the Deployment is complete as
//     `kubectl rollout status` sees it.
//
// The nodes are simulated: the bench creates the Node objects and acts as
// their agents (see nodeAgent). `portal server` runs with its agent, proxy
// and DNS disabled, pinned to one core; the bench runs on the other (see
// run.sh).
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"portal.dev/portal/bench/internal/host"
)

// namespace holds everything the bench creates.
const namespace = "bench"

var (
	portal    = flag.String("portal", "bin/portal", "portal binary")
	core      = flag.String("server-core", "0", "CPU the server is pinned to (empty: no pinning)")
	nodes     = flag.Int("nodes", 10, "simulated nodes")
	replicas  = flag.Int("replicas", 1000, "replicas the scale run reaches")
	anchorN   = flag.Int("anchor-services", 500, "Services created by each anchor run")
	rollN     = flag.Int("rollout-replicas", 100, "replicas of the rolling update")
	rounds    = flag.Int("rollouts", 3, "rolling updates to time")
	maxUnav   = flag.String("max-unavailable", "25%", "the rolling update's maxUnavailable (maxSurge is 25%)")
	profile   = flag.String("cpuprofile", "", "write the server's CPU profile of the scale run to this file")
	allocProf = flag.String("allocprofile", "", "write the server's allocations during the scale run (a delta over -profile-seconds) to this file")
	profRun   = flag.String("profile-run", "scale", "the run -cpuprofile and -allocprofile profile: scale or bare")
	profSecs  = flag.Int("profile-seconds", 15, "length of the CPU profile, from the scale request")
	keep      = flag.Bool("keep", false, "keep the data directory and the server's log")
	bare      = flag.Bool("bare", true, "also time the same number of bare pods created by the bench (no workload controller)")
	onlyBare  = flag.Bool("only-bare", false, "run the anchor and the bare pods only (a server without apps/v1)")
	via       = flag.String("via", "deployment", "what the scale run scales: deployment, or replicaset (the ReplicaSet controller alone)")
)

func main() {
	flag.Parse()
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

func run() error {
	dir, err := os.MkdirTemp("", "portal-bench-workloads-")
	if err != nil {
		return err
	}
	if *keep {
		fmt.Println("# data and log in", dir)
	} else {
		defer os.RemoveAll(dir)
	}
	srv, err := startServer(dir)
	if err != nil {
		return err
	}
	defer func() { srv.Process.Signal(syscall.SIGTERM); srv.Wait() }()
	pid := srv.Process.Pid
	cfg, err := clientcmd.BuildConfigFromFlags("", filepath.Join(dir, "admin.kubeconfig"))
	if err != nil {
		return err
	}
	cfg.QPS, cfg.Burst = 1e6, 1e6
	cfg.ContentType = runtime.ContentTypeProtobuf
	client := kubernetes.NewForConfigOrDie(cfg)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	agentErrs := make(chan error, 1)
	if err := startNodes(ctx, client, *nodes, agentErrs); err != nil {
		return err
	}
	before, err := anchor(ctx, client, pid, "before")
	if err != nil {
		return err
	}
	if *bare || *onlyBare {
		if err := bareRun(ctx, client, pid, *replicas, before); err != nil {
			return err
		}
	}
	if !*onlyBare {
		if err := scaleRun(ctx, client, pid, before); err != nil {
			return err
		}
	}
	after, err := anchor(ctx, client, pid, "after")
	if err != nil {
		return err
	}
	fmt.Printf("RESULT anchor cpu_per_service_create before=%s after=%s mean=%s\n", before.Round(time.Microsecond),
		after.Round(time.Microsecond), ((before + after) / 2).Round(time.Microsecond))
	if !*onlyBare && *via == "deployment" {
		if err := rolloutRun(ctx, client); err != nil {
			return err
		}
	}
	fmt.Printf("RESULT rss_mib=%.1f (portal server: API server, etcd, controllers)\n", host.MiB(pid, "status")["VmRSS"])
	select {
	case err := <-agentErrs:
		return fmt.Errorf("bench agent: %w", err)
	default:
		return nil
	}
}

// startServer runs `portal server` without the node-side components and
// waits for it to be ready. Nodes stay Ready for an hour without a Lease.
func startServer(dir string) (*exec.Cmd, error) {
	args := []string{"server", "--data-dir", dir, "--secure-port", "16996",
		"--disable", "dns,proxy,agent,ingress", "--node-monitor-grace-period", "1h"}
	name := *portal
	if *core != "" {
		args = append([]string{"-c", *core, *portal}, args...)
		name = "taskset"
	}
	cmd := exec.Command(name, args...)
	f, err := os.Create(filepath.Join(dir, "server.log"))
	if err != nil {
		return nil, err
	}
	cmd.Stdout, cmd.Stderr = f, f
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	if err := host.WaitHTTP("https://127.0.0.1:16996/readyz", 90*time.Second); err != nil {
		cmd.Process.Kill()
		cmd.Wait()
		return nil, err
	}
	return cmd, nil
}
