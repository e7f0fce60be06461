// Command ui loads the service map at /ui/ in headless Chromium against a
// cluster of N Services and M ready Pods (status written by the bench, as
// an agent would; no agents run) and reports how long the page takes to
// draw the map and to colour every Service, and the page's JavaScript heap
// and DOM size once it has. It fails when the load or the heap exceeds the
// bounds the issue sets (-max-load, -max-heap).
//
// Anchor, in the same run: the paged JSON lists the page itself makes,
// made by a Go client, so the ratio says what the page adds to fetching
// the data.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/heapprofiler"
	"github.com/chromedp/cdproto/performance"
	"github.com/chromedp/chromedp"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"portal.dev/portal/bench/internal/host"
)

var (
	portal   = flag.String("portal", "bin/portal", "portal binary")
	core     = flag.String("server-core", "0", "CPU for the server")
	services = flag.Int("services", 1000, "Services")
	podsPer  = flag.Int("pods-per-service", 10, "ready Pods per Service")
	nodes    = flag.Int("nodes", 10, "Ready nodes without agents")
	maxLoad  = flag.Duration("max-load", 2*time.Second, "fail when coloring the map takes longer")
	maxHeap  = flag.Int("max-heap-mib", 100, "fail when the page's JS heap is larger (MiB)")
	browser  = flag.String("chromium", "chromium", "Chromium binary")
)

func main() {
	flag.Parse()
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

func run() error {
	dir, err := os.MkdirTemp("", "portal-bench-ui-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	port, err := freePort()
	if err != nil {
		return err
	}
	stop, err := startServer(dir, port)
	if err != nil {
		return err
	}
	defer stop()
	base := fmt.Sprintf("https://127.0.0.1:%d", port)
	cfg, err := clientcmd.BuildConfigFromFlags("", filepath.Join(dir, "admin.kubeconfig"))
	if err != nil {
		return err
	}
	cfg.QPS, cfg.Burst = 1e6, 1e6
	ctx := context.Background()
	t0 := time.Now()
	token, err := populate(ctx, cfg)
	if err != nil {
		return err
	}
	fmt.Printf("# %d Services, %d ready Pods, %d nodes ready in %s\n", *services, *services**podsPer, *nodes, time.Since(t0).Round(time.Second))

	anchor, err := listLikeThePage(ctx, cfg)
	if err != nil {
		return err
	}
	m, err := loadPage(ctx, base, token)
	if err != nil {
		return err
	}
	fmt.Printf("RESULT ui services=%d pods=%d drawn=%s colored=%s heap_used=%.1fMiB heap_after_gc=%.1fMiB dom_nodes=%d\n",
		*services, *services**podsPer, m.drawn.Round(time.Millisecond), m.colored.Round(time.Millisecond),
		mib(m.heapUsed), mib(m.heapAfterGC), m.domNodes)
	fmt.Printf("# page timings %s\n", m.timings)
	fmt.Printf("RESULT anchor paged JSON lists by a Go client=%s; colored/anchor=%.1fx\n", anchor.Round(time.Millisecond),
		float64(m.colored)/float64(anchor))
	if m.colored > *maxLoad || mib(m.heapUsed) > float64(*maxHeap) {
		return fmt.Errorf("over the bounds: colored in %s (max %s), heap %.1f MiB (max %d)", m.colored, *maxLoad, mib(m.heapUsed), *maxHeap)
	}
	return nil
}

func mib(b float64) float64 { return b / (1 << 20) }

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// startServer runs portal server with only the API and controllers, and
// returns how to stop it.
func startServer(dir string, port int) (func(), error) {
	f, err := os.Create(filepath.Join(dir, "server.log"))
	if err != nil {
		return nil, err
	}
	srv := exec.Command("taskset", "-c", *core, *portal, "server", "--data-dir", dir, "--secure-port", strconv.Itoa(port),
		"--disable", "dns,proxy,agent,ingress", "--node-monitor-grace-period", "1h")
	srv.Stdout, srv.Stderr = f, f
	srv.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := srv.Start(); err != nil {
		return nil, err
	}
	stop := func() { srv.Process.Signal(syscall.SIGTERM); srv.Wait() }
	if err := host.WaitHTTP(fmt.Sprintf("https://127.0.0.1:%d/readyz", port), 90*time.Second); err != nil {
		stop()
		return nil, err
	}
	return stop, nil
}

// listLikeThePage times the lists the page makes, 500 items a page, in
// JSON, as a Go client.
func listLikeThePage(ctx context.Context, cfg *rest.Config) (time.Duration, error) {
	c, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return 0, err
	}
	paths := []string{"/api/v1/namespaces", "/api/v1/nodes", "/api/v1/services", "/apis/discovery.k8s.io/v1/endpointslices",
		"/api/v1/pods", "/apis/networking.k8s.io/v1/ingresses"}
	start := time.Now()
	for _, p := range paths {
		cont := ""
		for {
			req := c.CoreV1().RESTClient().Get().AbsPath(p).Param("limit", "500")
			if cont != "" {
				req = req.Param("continue", cont)
			}
			var page struct {
				Metadata struct {
					Continue string `json:"continue"`
				} `json:"metadata"`
			}
			body, err := req.SetHeader("Accept", "application/json").DoRaw(ctx)
			if err != nil {
				return 0, fmt.Errorf("list %s: %w", p, err)
			}
			if err := json.Unmarshal(body, &page); err != nil {
				return 0, err
			}
			if cont = page.Metadata.Continue; cont == "" {
				break
			}
		}
	}
	return time.Since(start), nil
}

// measures are what loadPage reports.
type measures struct {
	drawn, colored        time.Duration
	heapUsed, heapAfterGC float64
	domNodes              int
	timings               string // the page's own: lists fetched, map drawn
}

// loadPage opens the map with token and times it until every Service has
// a colour, then reads the page's metrics.
func loadPage(ctx context.Context, base, token string) (measures, error) {
	var m measures
	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(*browser), chromedp.NoSandbox,
		chromedp.Headless, chromedp.DisableGPU, chromedp.IgnoreCertErrors, chromedp.WindowSize(1280, 800))
	bounded, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	alloc, cancelAlloc := chromedp.NewExecAllocator(bounded, opts...)
	defer cancelAlloc()
	tab, cancelTab := chromedp.NewContext(alloc)
	defer cancelTab()
	err := chromedp.Do(tab, chromedp.Navigate(base+"/ui/"), chromedp.WaitVisible(chromedp.ID("login-form")))
	if err != nil {
		return m, err
	}
	if _, err := chromedp.Run(tab, chromedp.Evaluate[chromedp.Void](fmt.Sprintf(`sessionStorage.setItem('portal-token', %q)`, token))); err != nil {
		return m, err
	}
	start := time.Now()
	if err := chromedp.Do(tab, chromedp.Navigate(base+"/ui/"), chromedp.WaitVisible(chromedp.CSS(`body[data-loaded="true"]`))); err != nil {
		return m, err
	}
	m.drawn = time.Since(start)
	if m.timings, err = chromedp.Run(tab, chromedp.Evaluate[string](`JSON.stringify(window.portalTimings)`)); err != nil {
		return m, err
	}
	colored := fmt.Sprintf(`document.querySelectorAll('.svc:not([data-status="unknown"])').length >= %d`, *services)
	if _, err := chromedp.Run(tab, chromedp.Poll[chromedp.Void](colored, chromedp.WithPollingInterval(10*time.Millisecond), chromedp.WithPollingTimeout(time.Minute))); err != nil {
		return m, fmt.Errorf("waiting for %d coloured Services: %w", *services, err)
	}
	m.colored = time.Since(start)
	if m.heapUsed, m.domNodes, err = metrics(tab); err != nil {
		return m, err
	}
	if _, err := chromedp.Call(tab, heapprofiler.CollectGarbage, cdp.Empty{}); err != nil {
		return m, err
	}
	m.heapAfterGC, _, err = metrics(tab)
	return m, err
}

// metrics reads the page's JS heap in use and its DOM node count.
func metrics(tab context.Context) (float64, int, error) {
	if _, err := chromedp.Call(tab, performance.Enable, performance.EnableParams{}); err != nil {
		return 0, 0, err
	}
	res, err := chromedp.Call(tab, performance.GetMetrics, cdp.Empty{})
	if err != nil {
		return 0, 0, err
	}
	var heap float64
	var dom int
	for _, mt := range res.Metrics {
		switch mt.Name {
		case "JSHeapUsedSize":
			heap = mt.Value
		case "Nodes":
			dom = int(mt.Value)
		}
	}
	return heap, dom, nil
}
