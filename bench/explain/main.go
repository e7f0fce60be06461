// Command explain times `portal explain svc/NAME` on a cluster of N
// Services and M ready Pods (status written by the bench, as an agent
// would) spread over nodes that are Ready but have no agent, so every
// node's question fails fast, as on a node whose agent is gone.
//
// Anchor, in the same run: the API reads kubectl needs to show the same
// Service and its slices (get the Service, list its EndpointSlices by
// label), so the ratio says what the diagnosis costs on top of a look.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"slices"
	"time"

	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"

	"portal.dev/portal/bench/internal/cluster"
	"portal.dev/portal/explain"
)

var (
	portal   = flag.String("portal", "bin/portal", "portal binary")
	core     = flag.String("server-core", "0", "CPU for the server")
	services = flag.Int("services", 1000, "Services")
	podsPer  = flag.Int("pods-per-service", 10, "ready Pods per Service")
	nodes    = flag.Int("nodes", 10, "Ready nodes without agents")
	runs     = flag.Int("runs", 20, "explains to time")
)

func main() {
	flag.Parse()
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

func run() error {
	dir, err := os.MkdirTemp("", "portal-bench-explain-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	srv, err := cluster.Start(*portal, dir, *core)
	if err != nil {
		return err
	}
	defer srv.Stop()
	cfg, err := srv.Config()
	if err != nil {
		return err
	}
	cfg.ContentType = runtime.ContentTypeProtobuf
	client := kubernetes.NewForConfigOrDie(cfg)
	ctx := context.Background()

	t0 := time.Now()
	size := cluster.Size{Services: *services, PodsPerService: *podsPer, Nodes: *nodes, NodeAddresses: true}
	if err := cluster.Fill(ctx, client, size); err != nil {
		return err
	}
	fmt.Printf("# %d Services, %d ready Pods, %d nodes ready in %s\n", *services, *services**podsPer, *nodes, time.Since(t0).Round(time.Second))

	e := explain.New(explain.Config{Client: client})
	var took, anchor []time.Duration
	for i := range *runs {
		name := fmt.Sprintf("s%d", i*(*services)/(*runs))
		start := time.Now()
		if _, err := client.CoreV1().Services(cluster.Namespace).Get(ctx, name, metav1.GetOptions{}); err != nil {
			return err
		}
		if _, err := client.DiscoveryV1().EndpointSlices(cluster.Namespace).List(ctx, metav1.ListOptions{LabelSelector: discoveryv1.LabelServiceName + "=" + name}); err != nil {
			return err
		}
		anchor = append(anchor, time.Since(start))
		start = time.Now()
		r, err := e.Explain(ctx, cluster.Namespace, "svc/"+name)
		if err != nil {
			return err
		}
		took = append(took, time.Since(start))
		if i == 0 {
			explain.WriteText(os.Stdout, r)
		}
	}
	slices.Sort(took)
	slices.Sort(anchor)
	fmt.Printf("RESULT explain services=%d pods=%d nodes=%d runs=%d p50=%s max=%s\n", *services, *services**podsPer, *nodes, len(took),
		took[len(took)/2].Round(time.Millisecond), took[len(took)-1].Round(time.Millisecond))
	fmt.Printf("RESULT anchor get+list p50=%s; explain/anchor=%.1fx\n", anchor[len(anchor)/2].Round(time.Millisecond),
		float64(took[len(took)/2])/float64(anchor[len(anchor)/2]))
	return nil
}
