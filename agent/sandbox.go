//go:build linux

package agent

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"

	"portal.dev/portal/agent/container"
	"portal.dev/portal/agent/resolvconf"
)

// startSandbox creates the pod's namespaces, network and files.
func (a *Agent) startSandbox(ctx context.Context, pod *corev1.Pod, rt *podRuntime) error {
	etc := filepath.Join(rt.dir, "etc")
	if err := os.MkdirAll(etc, 0o755); err != nil {
		return err
	}
	hostname, _ := resolvconf.Hostname(pod, a.opts.ClusterDomain)
	if rt.st.StartTime.IsZero() {
		rt.st.StartTime = time.Now().Truncate(time.Second)
	}
	if pod.Spec.HostNetwork {
		rt.st.IPs = a.hostIPs()
		hostname, _ = os.Hostname()
	} else {
		if rt.sandbox != nil {
			rt.sandbox.Signal(syscall.SIGKILL)
		}
		devnull, err := os.OpenFile(os.DevNull, os.O_WRONLY, 0)
		if err != nil {
			return err
		}
		sb, err := a.runtime.Start(container.Spec{Init: a.opts.InitPath, Pause: true, Hostname: hostname,
			NewNamespaces: syscall.CLONE_NEWNET | syscall.CLONE_NEWUTS | syscall.CLONE_NEWIPC,
			Stdout:        devnull, Stderr: devnull})
		devnull.Close()
		if err != nil {
			return fmt.Errorf("start sandbox: %w", err)
		}
		rt.sandbox = sb
		rt.st.SandboxPid, rt.st.SandboxStart = sb.ID()
		if err := rt.save(); err != nil {
			return err
		}
		ips, err := a.net.Attach(ctx, string(pod.UID), rt.st.SandboxPid)
		if err != nil {
			sb.Signal(syscall.SIGKILL)
			return err
		}
		rt.st.IPs = nil
		for _, ip := range ips {
			rt.st.IPs = append(rt.st.IPs, ip.String())
		}
	}
	var dns []string
	for _, ip := range a.opts.ClusterDNS {
		dns = append(dns, ip.String())
	}
	files := map[string][]byte{
		"resolv.conf": resolvconf.ForPod(pod, resolvconf.Config{ClusterDomain: a.opts.ClusterDomain, ClusterDNS: dns, Node: a.dnsNode}).Bytes(),
		"hosts":       resolvconf.Hosts(pod, rt.st.IPs, a.opts.ClusterDomain, []byte(readFile("/etc/hosts"))),
		"hostname":    []byte(hostname + "\n"),
	}
	rt.st.Mounts = nil
	for name, data := range files {
		p := filepath.Join(etc, name)
		if err := os.WriteFile(p, data, 0o644); err != nil {
			return err
		}
		if _, err := os.Stat("/etc/" + name); err == nil {
			rt.st.Mounts = append(rt.st.Mounts, container.Mount{Source: p, Target: "/etc/" + name})
		}
	}
	rt.sandboxUp = true
	klog.FromContext(ctx).V(2).Info("Pod sandbox ready", "ips", rt.st.IPs)
	return rt.save()
}

func (rt *podRuntime) namespaces() container.Namespaces {
	if rt.st.HostNetwork || rt.sandbox == nil {
		return container.Namespaces{}
	}
	pid, _ := rt.sandbox.ID()
	return container.Of(pid)
}

// cleanup removes the pod's sandbox, network and files.
func (a *Agent) cleanup(ctx context.Context, rt *podRuntime) {
	if rt.sandbox != nil {
		rt.sandbox.Signal(syscall.SIGKILL)
		select {
		case <-rt.sandbox.Done():
		case <-time.After(5 * time.Second):
		}
	}
	if a.net != nil && !rt.st.HostNetwork {
		if err := a.net.Detach(ctx, string(rt.st.UID)); err != nil {
			klog.FromContext(ctx).Error(err, "Free pod addresses")
		}
	}
	rt.cleaned = true
	rt.sandboxUp = false
	for _, cr := range rt.ctrs {
		if cr.cancel != nil {
			cr.cancel()
		}
	}
	// Logs stay readable until the pod object is gone; state goes now so
	// a restarted agent does not adopt the pod again.
	os.Remove(filepath.Join(rt.dir, "state.json"))
	os.RemoveAll(filepath.Join(rt.dir, "etc"))
	os.RemoveAll(filepath.Join(rt.dir, "volumes"))
	rt.tokens = nil
	a.removeCgroups(ctx, rt.st.UID)
	if rt.terminating {
		os.RemoveAll(rt.dir)
	}
}
