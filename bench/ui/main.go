// Command ui loads the service map at /ui/ in headless Chromium against a
// cluster of N Services and M ready Pods (status written by the bench, as
// an agent would; no agents run) and reports how long the page takes to be
// complete (every list drawn and every Service coloured), and the page's
// JavaScript heap and DOM size once it is. It fails when the load or the
// heap exceeds the bounds the issue sets (-max-load, -max-heap).
//
// With -portal-b it compares two builds on the same data: the cluster is
// filled once, then each run restarts the server from one binary or the
// other, alternately (A, B, A, B...), so that a shared box's load falls on
// both alike; it reports each binary's median and their ratio.
//
// Anchor, in the same run: the paged JSON lists the old page made, made
// by a Go client, so the ratio says what the page adds to fetching data.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/heapprofiler"
	"github.com/chromedp/cdproto/performance"
	"github.com/chromedp/chromedp"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"portal.dev/portal/bench/internal/cluster"
	"portal.dev/portal/bench/internal/host"
)

var (
	portal   = flag.String("portal", "bin/portal", "portal binary (A)")
	portalB  = flag.String("portal-b", "", "a second portal binary (B) to compare with A on the same data")
	runs     = flag.Int("runs", 1, "page loads per binary, alternating A and B")
	dataDir  = flag.String("data-dir", "", "keep the cluster here and reuse it when it is already filled (default: a temporary directory)")
	settle   = flag.Duration("settle", 2*time.Minute, "longest wait after each server start for the server to go quiet, so its start-up work is not measured")
	core     = flag.String("server-core", "0", "CPU for the server")
	services = flag.Int("services", 1000, "Services")
	podsPer  = flag.Int("pods-per-service", 10, "ready Pods per Service")
	nodes    = flag.Int("nodes", 10, "Ready nodes without agents")
	maxLoad  = flag.Duration("max-load", 2*time.Second, "fail when the page takes longer to be complete")
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
	dir := *dataDir
	if dir == "" {
		d, err := os.MkdirTemp("", "portal-bench-ui-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(d)
		dir = d
	}
	token, err := filled(dir)
	if err != nil {
		return err
	}
	bins := []string{*portal}
	if *portalB != "" {
		bins = append(bins, *portalB)
	}
	// Per binary and load (the cold first after a start, the warm second):
	// complete times, and server CPU plus page busy time.
	var loads, cpus [2][2][]time.Duration
	var worst measures
	for r := range *runs {
		for b, bin := range bins {
			ms, err := runOnce(dir, bin, token)
			if err != nil {
				return fmt.Errorf("%s: %w", bin, err)
			}
			for l, m := range ms {
				fmt.Printf("RESULT ui run=%d binary=%s load=%s services=%d pods=%d drawn=%s complete=%s heap_used=%.1fMiB heap_after_gc=%.1fMiB dom_nodes=%d server_cpu=%s page_task=%s anchor=%s\n",
					r+1, bin, loadNames[l], *services, *services**podsPer, m.drawn.Round(time.Millisecond), m.complete.Round(time.Millisecond),
					mib(m.heapUsed), mib(m.heapAfterGC), m.domNodes, m.serverCPU, m.pageTask.Round(time.Millisecond), m.anchor.Round(time.Millisecond))
				fmt.Printf("# page timings %s\n", m.timings)
				loads[b][l] = append(loads[b][l], m.complete)
				cpus[b][l] = append(cpus[b][l], m.serverCPU+m.pageTask)
				if b == len(bins)-1 && (m.complete > worst.complete || m.heapUsed > worst.heapUsed) {
					worst = m
				}
			}
		}
	}
	for l, name := range loadNames {
		for b, bin := range bins {
			fmt.Printf("RESULT median binary=%s load=%s complete=%s of %s; server CPU + page task=%s of %s\n", bin, name,
				median(loads[b][l]).Round(time.Millisecond), loads[b][l], median(cpus[b][l]).Round(time.Millisecond), cpus[b][l])
		}
		if len(bins) == 2 {
			fmt.Printf("RESULT B/A load=%s complete=%.2fx server CPU + page task=%.2fx\n", name,
				float64(median(loads[1][l]))/float64(median(loads[0][l])), float64(median(cpus[1][l]))/float64(median(cpus[0][l])))
		}
	}
	cold := median(loads[len(bins)-1][0])
	if cold > *maxLoad || mib(worst.heapUsed) > float64(*maxHeap) {
		return fmt.Errorf("over the bounds: complete in %s (max %s), heap %.1f MiB (max %d)", cold, *maxLoad, mib(worst.heapUsed), *maxHeap)
	}
	return nil
}

// loadNames name the two loads of each server start: the first fills the
// server's UI caches, the second finds them filled, as every later user
// of that server does.
var loadNames = [2]string{"cold", "warm"}

func median(d []time.Duration) time.Duration {
	s := slices.Clone(d)
	slices.Sort(s)
	return s[len(s)/2]
}

// filled returns the page's token for the cluster kept in dir, filling it
// first when it holds none yet.
func filled(dir string) (string, error) {
	tokenFile := filepath.Join(dir, "bench-ui-token")
	if b, err := os.ReadFile(tokenFile); err == nil {
		return string(b), nil
	} else if !errors.Is(err, os.ErrNotExist) {
		return "", err
	}
	srv, err := cluster.Start(*portal, dir, *core)
	if err != nil {
		return "", err
	}
	defer srv.Stop()
	cfg, err := srv.Config()
	if err != nil {
		return "", err
	}
	t0 := time.Now()
	token, err := populate(context.Background(), cfg)
	if err != nil {
		return "", err
	}
	fmt.Printf("# %d Services, %d ready Pods, %d nodes ready in %s\n", *services, *services**podsPer, *nodes, time.Since(t0).Round(time.Second))
	return token, os.WriteFile(tokenFile, []byte(token), 0o600)
}

// runOnce starts bin on the filled cluster in dir, lets it settle, times
// the anchor lists and two loads of the page, and stops it.
func runOnce(dir, bin, token string) ([2]measures, error) {
	var none [2]measures
	srv, err := cluster.Start(bin, dir, *core)
	if err != nil {
		return none, err
	}
	defer srv.Stop()
	pid := srv.PID()
	quiet(pid, *settle)
	cfg, err := srv.Config()
	if err != nil {
		return none, err
	}
	ctx := context.Background()
	anchor, err := listLikeThePage(ctx, cfg)
	if err != nil {
		return none, err
	}
	var ms [2]measures
	for l := range ms {
		before := host.CPU(pid)
		m, err := loadPage(ctx, cfg.Host, token)
		if err != nil {
			return ms, err
		}
		m.serverCPU = host.CPU(pid) - before
		m.anchor = anchor
		ms[l] = m
		quiet(pid, *settle)
	}
	return ms, nil
}

func mib(b float64) float64 { return b / (1 << 20) }

// quiet waits until pid has used under a tenth of a core over a second,
// or for at most max: a restarted server resyncs its controllers and
// caches first, which is no part of a page load.
func quiet(pid int, max time.Duration) {
	for deadline := time.Now().Add(max); time.Now().Before(deadline); {
		before := host.CPU(pid)
		time.Sleep(time.Second)
		if host.CPU(pid)-before < 100*time.Millisecond {
			return
		}
	}
}

// listLikeThePage times the lists the old page made, 500 items a page,
// in JSON, as a Go client.
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
	drawn, complete       time.Duration
	anchor                time.Duration
	serverCPU             time.Duration // the server's CPU time during the load
	pageTask              time.Duration // the page's main thread busy (Chromium's TaskDuration)
	heapUsed, heapAfterGC float64
	domNodes              int
	timings               string // the page's own: lists fetched, map drawn
}

// loadPage opens the map with token and times it until the page says it
// has drawn every list and every Service has a colour, then reads the
// page's metrics.
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
	// Chromium counts the page's busy time only while metrics are enabled.
	if _, err := chromedp.Call(tab, performance.Enable, performance.EnableParams{}); err != nil {
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
	m.complete = time.Since(start)
	if m.heapUsed, m.domNodes, m.pageTask, err = metrics(tab); err != nil {
		return m, err
	}
	if _, err := chromedp.Call(tab, heapprofiler.CollectGarbage, cdp.Empty{}); err != nil {
		return m, err
	}
	m.heapAfterGC, _, _, err = metrics(tab)
	return m, err
}

// metrics reads the page's JS heap in use, its DOM node count and how
// long its main thread has been busy.
func metrics(tab context.Context) (float64, int, time.Duration, error) {
	if _, err := chromedp.Call(tab, performance.Enable, performance.EnableParams{}); err != nil {
		return 0, 0, 0, err
	}
	res, err := chromedp.Call(tab, performance.GetMetrics, cdp.Empty{})
	if err != nil {
		return 0, 0, 0, err
	}
	var heap, task float64
	var dom int
	for _, mt := range res.Metrics {
		switch mt.Name {
		case "JSHeapUsedSize":
			heap = mt.Value
		case "Nodes":
			dom = int(mt.Value)
		case "TaskDuration":
			task = mt.Value // seconds
		}
	}
	return heap, dom, time.Duration(task * float64(time.Second)), nil
}
