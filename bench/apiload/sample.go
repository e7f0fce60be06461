package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"portal.dev/portal/bench/internal/host"
)

// sample is one reading of the server's memory.
type sample struct {
	phase string
	t     time.Duration // since the phase began: for "after", since the load ended

	rss, anon, file float64 // MiB, /proc/PID/status
	// The Go runtime's view, MiB, from /metrics.
	heapInuse, heapIdle, heapReleased float64
	goroutines                        float64
	// Watches of ConfigMaps the server serves, and the watchers its
	// watch cache has ended as unresponsive since it started.
	cmWatchers, terminated float64

	creates   int64
	delivered int64
	dropped   int
}

// sampler reads the server's memory every few seconds and prints a row
// per reading.
type sampler struct {
	pid     int
	client  kubernetes.Interface
	every   time.Duration
	samples []sample
	header  bool
}

func newSampler(pid int, cfg *rest.Config, every time.Duration) *sampler {
	return &sampler{pid: pid, client: kubernetes.NewForConfigOrDie(cfg), every: every}
}

func (s *sampler) read(ctx context.Context, phase string, t time.Duration, l *load) sample {
	st := host.MiB(s.pid, "status")
	r := sample{phase: phase, t: t, rss: st["VmRSS"], anon: st["RssAnon"], file: st["RssFile"]}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if data, err := s.client.CoreV1().RESTClient().Get().AbsPath("/metrics").DoRaw(ctx); err == nil {
		m := parseMetrics(data)
		mib := func(name string) float64 { return m[name] / (1 << 20) }
		r.heapInuse, r.heapIdle, r.heapReleased = mib("go_memstats_heap_inuse_bytes"), mib("go_memstats_heap_idle_bytes"), mib("go_memstats_heap_released_bytes")
		r.goroutines = m["go_goroutines"]
		r.cmWatchers = m[`apiserver_longrunning_requests{component="apiserver",group="",resource="configmaps",scope="cluster",subresource="",verb="WATCH",version="v1"}`] +
			m[`apiserver_longrunning_requests{component="apiserver",group="",resource="configmaps",scope="namespace",subresource="",verb="WATCH",version="v1"}`]
		r.terminated = m[`apiserver_terminated_watchers_total{group="",resource="configmaps"}`]
	}
	if l != nil {
		r.creates, r.delivered, r.dropped = l.creates.Load(), l.delivered(), l.droppedSoFar()
	}
	return r
}

// parseMetrics returns the value of each series of a Prometheus text
// exposition, keyed by the series as written (name and labels).
func parseMetrics(data []byte) map[string]float64 {
	m := map[string]float64{}
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || line[0] == '#' {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		if i < 0 {
			continue
		}
		if v, err := strconv.ParseFloat(line[i+1:], 64); err == nil {
			m[line[:i]] = v
		}
	}
	return m
}

func (s *sampler) add(r sample) {
	if !s.header {
		fmt.Printf("%-6s %6s %7s %7s %7s %10s %9s %9s %7s %8s %8s %10s %7s %10s\n",
			"phase", "t", "rss", "anon", "file", "heap_inuse", "heap_idle", "released", "gorout", "cm_watch", "creates", "delivered", "dropped", "terminated")
		s.header = true
	}
	fmt.Printf("%-6s %5.0fs %7.0f %7.0f %7.0f %10.0f %9.0f %9.0f %7.0f %8.0f %8d %10d %7d %10.0f\n",
		r.phase, r.t.Seconds(), r.rss, r.anon, r.file, r.heapInuse, r.heapIdle, r.heapReleased,
		r.goroutines, r.cmWatchers, r.creates, r.delivered, r.dropped, r.terminated)
	s.samples = append(s.samples, r)
}

// idle samples for d with no load running.
// l, when not nil, is the finished load whose watchers may still read.
func (s *sampler) idle(ctx context.Context, phase string, d time.Duration, l *load) {
	start := time.Now()
	for t := time.Duration(0); t <= d; t = time.Since(start) {
		s.add(s.read(ctx, phase, t, l))
		time.Sleep(time.Until(start.Add(t.Truncate(s.every) + s.every)))
	}
}

// during samples until done is closed.
func (s *sampler) during(ctx context.Context, phase string, done <-chan struct{}, l *load) {
	start := time.Now()
	tick := time.NewTicker(s.every)
	defer tick.Stop()
	for {
		s.add(s.read(ctx, phase, time.Since(start), l))
		select {
		case <-done:
			s.add(s.read(ctx, phase, time.Since(start), l))
			return
		case <-tick.C:
		}
	}
}

func (s *sampler) last() sample { return s.samples[len(s.samples)-1] }

// peak is the reading of the load phase with the highest RSS.
func (s *sampler) peak() sample {
	var p sample
	for _, r := range s.samples {
		if r.phase == "load" && r.rss > p.rss {
			p = r
		}
	}
	return p
}

// at is the first reading at least d after the load ended.
func (s *sampler) at(d time.Duration) sample {
	for _, r := range s.samples {
		if r.phase == "after" && r.t >= d {
			return r
		}
	}
	return s.last()
}

// heapProfile saves the server's heap profile (the generic API server
// serves /debug/pprof to the admin).
func (s *sampler) heapProfile(ctx context.Context, file string) {
	data, err := s.client.CoreV1().RESTClient().Get().AbsPath("/debug/pprof/heap").DoRaw(ctx)
	if err != nil {
		fmt.Println("# heap profile:", err)
		return
	}
	if err := os.WriteFile(file, data, 0o644); err != nil {
		fmt.Println("# heap profile:", err)
	}
}

// cpuProfile saves the server's CPU profile of d, starting after wait.
func (s *sampler) cpuProfile(ctx context.Context, file string, wait, d time.Duration) {
	time.Sleep(wait)
	data, err := s.client.CoreV1().RESTClient().Get().AbsPath("/debug/pprof/profile").
		Param("seconds", fmt.Sprint(int(d.Seconds()))).Timeout(d + time.Minute).DoRaw(ctx)
	if err != nil {
		fmt.Println("# cpu profile:", err)
		return
	}
	if err := os.WriteFile(file, data, 0o644); err != nil {
		fmt.Println("# cpu profile:", err)
	}
}
