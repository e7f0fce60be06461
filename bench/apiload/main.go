// Command apiload measures what a burst of API load leaves behind in the
// server: its memory before, during and for minutes after a load of many
// ConfigMap watches and clients listing and creating small ConfigMaps, and
// whether the server dropped any watcher that kept reading.
//
// It starts `portal server` (API server, embedded etcd and controllers; no
// node-side components) in a fresh data directory and prints a table of
// samples (RSS from /proc, the Go heap from the server's /metrics) and
// RESULT lines. Each watcher and each client has a connection of its own,
// as separate processes would. Before the load and at the end it also
// forces a collection in the server and says where its resident memory is
// (the live heap, free space inside the heap's spans, stacks and other
// runtime memory, the executable's and etcd's database's pages), and how
// much of each the load added per ConfigMap.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"portal.dev/portal/bench/internal/host"
)

// port is the API port of the bench's server (-port; other benches use
// 16996-16999), so that two runs can share a machine.
var port = "16994"

type options struct {
	portal     string
	core       string
	load       time.Duration
	after      time.Duration
	every      time.Duration
	watchers   int
	clients    int
	scope      string
	heapPrefix string
	cpuProfile string
	keep       bool
	extraArgs  string
	extraEnv   string
}

func main() {
	var o options
	flag.StringVar(&o.portal, "portal", "bin/portal", "portal binary")
	flag.StringVar(&port, "port", port, "API port of the server")
	flag.StringVar(&o.core, "server-core", "", "CPU list the server is pinned to (empty: no pinning)")
	flag.DurationVar(&o.load, "load", 60*time.Second, "length of the load")
	flag.DurationVar(&o.after, "after", 150*time.Second, "how long to sample after the load")
	flag.DurationVar(&o.every, "every", 5*time.Second, "time between samples")
	flag.IntVar(&o.watchers, "watchers", 200, "ConfigMap watches")
	flag.IntVar(&o.clients, "clients", 50, "clients creating and listing ConfigMaps, each in a namespace of its own")
	flag.StringVar(&o.scope, "watch-scope", "all", "all: every watch is of all namespaces; namespace: watch i is of client i%clients's namespace")
	flag.StringVar(&o.heapPrefix, "heap-profile", "", "write the server's heap profiles (before the load, end of load, end of run) to PREFIX-before.pb.gz, PREFIX-load.pb.gz and PREFIX-after.pb.gz")
	flag.StringVar(&o.cpuProfile, "cpu-profile", "", "write the server's CPU profile of the load's second quarter to this file")
	flag.BoolVar(&o.keep, "keep", false, "keep the data directory and the server's log")
	flag.StringVar(&o.extraArgs, "server-args", "", "more arguments for portal server, space-separated")
	flag.StringVar(&o.extraEnv, "server-env", "", "more environment for portal server, space-separated KEY=VALUE")
	flag.Parse()
	if o.scope != "all" && o.scope != "namespace" {
		fmt.Fprintln(os.Stderr, "bench: -watch-scope is all or namespace")
		os.Exit(2)
	}
	if err := run(o); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

func run(o options) error {
	dir, err := os.MkdirTemp("", "portal-apiload-")
	if err != nil {
		return err
	}
	if o.keep {
		fmt.Println("# data directory and log:", dir)
	} else {
		defer os.RemoveAll(dir)
	}
	srv, err := startServer(o, dir)
	if err != nil {
		return err
	}
	defer stopServer(srv)
	cfg, err := clientcmd.BuildConfigFromFlags("", filepath.Join(dir, "admin.kubeconfig"))
	if err != nil {
		return err
	}
	cfg.QPS, cfg.Burst = 1e6, 1e6
	cfg.ContentType = runtime.ContentTypeProtobuf
	cfg.AcceptContentTypes = runtime.ContentTypeProtobuf + "," + runtime.ContentTypeJSON

	ctx := context.Background()
	s := newSampler(srv.Process.Pid, ownConnection(cfg), o.every)
	// The controllers start their informers once the API is ready; let
	// the server settle before the figure the others are compared with.
	s.idle(ctx, "before", 30*time.Second, nil)
	before := s.last()
	if o.heapPrefix != "" {
		s.heapProfile(ctx, o.heapPrefix+"-before.pb.gz")
	}
	memBefore, errBefore := s.readBreakdown(ctx)

	l, err := newLoad(ctx, cfg, o)
	if err != nil {
		return err
	}
	loadCtx, stopLoad := context.WithTimeout(ctx, o.load)
	done := make(chan struct{})
	go func() {
		l.run(loadCtx)
		close(done)
	}()
	if o.cpuProfile != "" {
		go s.cpuProfile(ctx, o.cpuProfile, o.load/4, o.load/4)
	}
	s.during(ctx, "load", done, l)
	stopLoad()
	peak := s.peak()
	if o.heapPrefix != "" {
		s.heapProfile(ctx, o.heapPrefix+"-load.pb.gz")
	}
	// The clients go away as the load ends. The watchers read on until
	// they have seen every create (one that was merely behind catches up),
	// then go away too: "after" is an idle server.
	l.closeConnections()
	finished := make(chan watchSummary, 1)
	go func() {
		l.finish(30 * time.Second)
		finished <- l.watchSummary()
	}()
	s.idle(ctx, "after", o.after, l)
	if o.heapPrefix != "" {
		s.heapProfile(ctx, o.heapPrefix+"-after.pb.gz")
	}
	// Last, since it forces a collection.
	memAfter, errAfter := s.readBreakdown(ctx)
	err = report(o, before, peak, s, l, <-finished)
	if err := errors.Join(errBefore, errAfter); err != nil {
		fmt.Println("# memory breakdown:", err)
	} else {
		printBreakdown("before", memBefore, memBefore, 0)
		printBreakdown("end", memAfter, memBefore, l.creates.Load())
	}
	return err
}

// ownConnection returns cfg with a transport of its own: client-go shares
// one connection among clients of equal TLS settings unless a proxy
// function is set.
func ownConnection(cfg *rest.Config) *rest.Config {
	c := rest.CopyConfig(cfg)
	c.Proxy = func(*http.Request) (*url.URL, error) { return nil, nil }
	return c
}

func report(o options, before, peak sample, s *sampler, l *load, w watchSummary) error {
	at2 := s.at(2 * time.Minute)
	last := s.last()
	fmt.Printf("RESULT load watchers=%d scope=%s clients=%d load=%s creates=%d lists=%d errors=%d configmaps_per_s=%.0f\n",
		o.watchers, o.scope, o.clients, o.load, l.creates.Load(), l.lists.Load(), l.errors.Load(),
		float64(l.creates.Load())/o.load.Seconds())
	fmt.Printf("RESULT rss_mib before=%.0f peak=%.0f after_2min=%.0f end=%.0f ratio_2min=%.2f (goal < 1.5)\n",
		before.rss, peak.rss, at2.rss, last.rss, at2.rss/before.rss)
	fmt.Printf("RESULT heap_inuse_mib before=%.0f peak=%.0f after_2min=%.0f end=%.0f\n",
		before.heapInuse, peak.heapInuse, at2.heapInuse, last.heapInuse)
	l.printErrors(5)
	fmt.Printf("RESULT watchers dropped=%d (watches the server ended while the client read; %0.f ended by the watch cache as unresponsive) complete=%d/%d out_of_order=%d\n",
		w.dropped, last.terminated-before.terminated, w.complete, o.watchers, w.outOfOrder)
	if w.dropped > 0 || w.outOfOrder > 0 {
		return errors.New("watchers were dropped or saw events out of order")
	}
	return nil
}

func startServer(o options, dir string) (*exec.Cmd, error) {
	args := []string{"server", "--data-dir", dir, "--secure-port", port, "--disable", "dns,proxy,agent,ingress"}
	if o.extraArgs != "" {
		args = append(args, strings.Fields(o.extraArgs)...)
	}
	name := o.portal
	if o.core != "" {
		args = append([]string{"-c", o.core, o.portal}, args...)
		name = "taskset"
	}
	cmd := exec.Command(name, args...)
	cmd.Env = append(os.Environ(), strings.Fields(o.extraEnv)...)
	log, err := os.Create(filepath.Join(dir, "server.log"))
	if err != nil {
		return nil, err
	}
	cmd.Stdout, cmd.Stderr = log, log
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	if err := host.WaitHTTP("https://127.0.0.1:"+port+"/readyz", 90*time.Second); err != nil {
		stopServer(cmd)
		return nil, fmt.Errorf("%w; see %s", err, log.Name())
	}
	return cmd, nil
}

func stopServer(cmd *exec.Cmd) {
	cmd.Process.Signal(syscall.SIGTERM)
	cmd.Wait()
}
