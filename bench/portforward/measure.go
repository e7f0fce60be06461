package main

import (
	"bufio"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"portal.dev/portal/bench/internal/host"
)

// path is one way to the pod's file: the anchor, or a kubectl
// port-forward whose process is pf.
type path struct {
	name string
	url  string
	pf   *exec.Cmd
	// bound marks the kubectl anchor: kubectl against the in-process
	// peer, where only kubectl's CPU is of interest.
	bound bool

	rates                  []float64 // MiB/s per download
	kubectl, server, agent []float64 // CPU ms per MiB per download
}

// measure downloads the file through each path in turn, rounds times,
// after one download each that is not counted, and prints each download
// and the medians.
func (b *bench) measure() error {
	paths := []*path{{name: "direct", url: fmt.Sprintf("http://%s:%d/big", b.podIP, podPort)}}
	peerConfig := filepath.Join(*dir, "peer.kubeconfig")
	peer, err := startPeer(peerConfig)
	if err != nil {
		return err
	}
	defer peer.srv.Close()
	for i, t := range []struct{ name, target, ports, kubeconfig string }{
		{"kubectl-alone", "pod/web", "18082:8080", peerConfig},
		{"pod/web", "pod/web", fmt.Sprintf("18080:%d", podPort), ""},
		{"svc/web", "svc/web", "18081:80", ""},
	} {
		pf, err := b.portForward(t.target, t.ports, t.kubeconfig)
		if err != nil {
			return err
		}
		port := [...]int{18082, 18080, 18081}[i]
		paths = append(paths, &path{name: t.name, url: fmt.Sprintf("http://127.0.0.1:%d/big", port), pf: pf, bound: i == 0})
	}
	c := &http.Client{Transport: &http.Transport{DisableCompression: true, DisableKeepAlives: true}}
	for _, p := range paths {
		if _, err := download(c, p.url); err != nil {
			return fmt.Errorf("%s: %v", p.name, err)
		}
	}
	for r := range *rounds {
		for _, p := range paths {
			if err := b.round(c, r, p); err != nil {
				return err
			}
		}
	}
	printResults(paths)
	return nil
}

// printResults prints the medians: each port-forward's rate as a ratio
// to the direct download and to kubectl's bound.
func printResults(paths []*path) {
	anchor, bound := median(paths[0].rates), median(paths[1].rates)
	fmt.Printf("RESULT direct MiB/s=%.0f\n", anchor)
	k := median(paths[1].kubectl)
	fmt.Printf("RESULT kubectl-alone MiB/s=%.0f ratio=%.2fx cpu_ms_per_mib kubectl=%.2f (one core of it: %.0f MiB/s = %.2fx)\n",
		bound, bound/anchor, k, 1000/k, 1000/k/anchor)
	for _, p := range paths[2:] {
		rate := median(p.rates)
		fmt.Printf("RESULT %s MiB/s=%.0f ratio=%.2fx of_bound=%.2fx cpu_ms_per_mib kubectl=%.2f apiserver=%.2f agent=%.2f\n",
			p.name, rate, rate/anchor, rate/bound, median(p.kubectl), median(p.server), median(p.agent))
	}
}

// round downloads once through p and records the rate and, for a
// port-forward, the CPU time of kubectl, the API server and the agent.
func (b *bench) round(c *http.Client, r int, p *path) error {
	pids := []int{b.server.Process.Pid, b.agent.Process.Pid}
	if p.pf != nil {
		pids = append(pids, p.pf.Process.Pid)
	}
	before := make([]time.Duration, len(pids))
	for i, pid := range pids {
		before[i] = host.CPU(pid)
	}
	rate, err := download(c, p.url)
	if err != nil {
		return fmt.Errorf("round %d, %s: %v", r+1, p.name, err)
	}
	p.rates = append(p.rates, rate)
	if p.pf == nil {
		fmt.Printf("round %d %-13s %6.0f MiB/s\n", r+1, p.name, rate)
		return nil
	}
	perMiB := make([]float64, len(pids))
	for i, pid := range pids {
		perMiB[i] = float64(host.CPU(pid)-before[i]) / float64(time.Millisecond) / float64(*sizeMiB)
	}
	if p.bound {
		p.kubectl = append(p.kubectl, perMiB[2])
		fmt.Printf("round %d %-13s %6.0f MiB/s  cpu ms/MiB kubectl %.2f\n", r+1, p.name, rate, perMiB[2])
		return nil
	}
	p.server, p.agent, p.kubectl = append(p.server, perMiB[0]), append(p.agent, perMiB[1]), append(p.kubectl, perMiB[2])
	fmt.Printf("round %d %-13s %6.0f MiB/s  cpu ms/MiB kubectl %.2f apiserver %.2f agent %.2f\n",
		r+1, p.name, rate, perMiB[2], perMiB[0], perMiB[1])
	return nil
}

// download fetches url and returns its rate in MiB/s; the whole file must
// arrive.
func download(c *http.Client, url string) (float64, error) {
	start := time.Now()
	resp, err := c.Get(url)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	n, err := io.Copy(io.Discard, resp.Body)
	if err != nil {
		return 0, fmt.Errorf("after %d bytes: %v", n, err)
	}
	if resp.StatusCode != http.StatusOK || n != int64(*sizeMiB)<<20 {
		return 0, fmt.Errorf("status %d, %d bytes", resp.StatusCode, n)
	}
	return float64(n) / (1 << 20) / time.Since(start).Seconds(), nil
}

// portForward starts kubectl port-forward to target and returns once it
// listens; kubeconfig is the admin's unless given.
func (b *bench) portForward(target, ports, kubeconfig string) (*exec.Cmd, error) {
	if kubeconfig == "" {
		kubeconfig = filepath.Join(*dir, "server", "admin.kubeconfig")
	}
	argv := []string{*kubectl}
	if *kubectl == "" {
		if p, err := exec.LookPath("kubectl"); err == nil {
			argv = []string{p}
		} else {
			argv = []string{*portal, "kubectl"}
		}
	}
	argv = append(argv, "port-forward", target, ports)
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = append(os.Environ(), "KUBECONFIG="+kubeconfig)
	if *useSPDY {
		cmd.Env = append(cmd.Env, "KUBECTL_PORT_FORWARD_WEBSOCKETS=false")
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	cmd.Stderr = cmd.Stdout
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	b.procs.Add(cmd)
	listening := make(chan struct{})
	go func() {
		sc := bufio.NewScanner(out)
		said := false
		for sc.Scan() {
			if !said && strings.HasPrefix(sc.Text(), "Forwarding from 127.0.0.1:") {
				close(listening)
				said = true
			}
		}
	}()
	select {
	case <-listening:
		return cmd, nil
	case <-time.After(30 * time.Second):
		return nil, fmt.Errorf("kubectl port-forward %s: not listening after 30s", target)
	}
}
