package main

import (
	"fmt"
	"net/netip"
	"os"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/klog/v2"

	"portal.dev/portal/agent"
	"portal.dev/portal/agent/container"
	"portal.dev/portal/internal/cidrflag"
)

// addAgentFlags adds the node agent's flags, kubelet's names where the
// concept is the same.
func addAgentFlags(fs *pflag.FlagSet, o *agent.Options) {
	fs.StringVar(&o.NodeName, "hostname-override", o.NodeName, "the Node's name (default: the host name)")
	fs.Var(addrList{&o.NodeIPs}, "node-ip", "the node's addresses, IPv4 and/or IPv6, comma-separated (default: the first non-loopback address)")
	fs.Var(labelMap{&o.NodeLabels}, "node-labels", "labels added to the Node: key=value,...")
	fs.Var(cidrflag.NewValue(&o.PodCIDRs), "pod-cidr", "the node's pod CIDRs, IPv4 and/or IPv6 (default: wait for spec.podCIDRs from the controller-manager's node IPAM)")
	fs.Var(cidrflag.NewValue(&o.ClusterCIDRs), "cluster-cidr", "the cluster's pod CIDRs; pod traffic to elsewhere is masqueraded (default: every Node's pod CIDRs)")
	fs.StringVar(&o.ClusterDomain, "cluster-domain", o.ClusterDomain, "the cluster zone, for the pods' DNS search path")
	fs.Var(addrList{&o.ClusterDNS}, "cluster-dns", "the cluster DNS Service's addresses, the pods' nameservers for dnsPolicy ClusterFirst")
	fs.StringVar(&o.RootDir, "root-dir", o.RootDir, "the agent's state: pod files, logs, address allocations, processes to re-adopt")
	fs.StringVar(&o.HealthzBindAddress, "healthz-bind-address", o.HealthzBindAddress, "address for /healthz (plain HTTP; empty disables)")
	fs.IntVar(&o.Port, "port", o.Port, "HTTPS port of the container log endpoint (0 disables)")
	fs.StringVar(&o.ProxyStatusAddress, "proxy-status-address", o.ProxyStatusAddress, "where this node's service proxy serves /status (its --metrics-bind-address), forwarded to portal explain; empty disables")
	fs.StringVar(&o.IngressHTTPAddress, "ingress-http-address", o.IngressHTTPAddress, "where this node's Ingress controller serves plain HTTP (HOST:PORT), for portal explain's requests through it; empty disables")
	fs.StringVar(&o.IngressHTTPSAddress, "ingress-https-address", o.IngressHTTPSAddress, "where this node's Ingress controller serves HTTPS (HOST:PORT), for portal explain's requests through it; empty disables")
	fs.StringVar(&o.IngressStatusAddress, "ingress-status-address", o.IngressStatusAddress, "where an Ingress controller on this node serves its metrics (its --metrics-bind-address), forwarded to the service map; empty disables")
	fs.IntVar(&o.MaxPods, "max-pods", o.MaxPods, "pods the node reports it can run")
	fs.StringVar(&o.ResolvConf, "resolv-conf", o.ResolvConf, "the node's resolver configuration, for dnsPolicy Default and the ClusterFirst search path")
	fs.StringVar(&o.CgroupRoot, "cgroup-root", o.CgroupRoot, "where the node's cgroup file systems are mounted, as the agent sees them; pods get cgroups under portal/ there")
	fs.Float32Var(&o.KubeAPIQPS, "kube-api-qps", o.KubeAPIQPS, "requests per second to the API server")
	fs.IntVar(&o.KubeAPIBurst, "kube-api-burst", o.KubeAPIBurst, "requests allowed in a burst above --kube-api-qps")
}

func newAgentCommand() *cobra.Command {
	o := agent.DefaultOptions()
	var api apiFlags
	cmd := &cobra.Command{
		Use:   "agent",
		Short: "Run the node agent: register the Node, run its pods as processes with their own network, probe them, report their status",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			collectGarbageSooner()
			cfg, _, err := componentClient(cmd.Context(), api, "portal-agent")
			if err != nil {
				return err
			}
			cfg.QPS, cfg.Burst = o.KubeAPIQPS, o.KubeAPIBurst
			client, err := kubernetes.NewForConfig(cfg)
			if err != nil {
				return err
			}
			o.ClientCAData = cfg.TLSClientConfig.CAData
			if len(o.ClientCAData) == 0 && cfg.TLSClientConfig.CAFile != "" {
				if o.ClientCAData, err = os.ReadFile(cfg.TLSClientConfig.CAFile); err != nil {
					return err
				}
			}
			if o.EventClient, err = eventClient(cfg); err != nil {
				return err
			}
			a, err := agent.New(client, o)
			if err != nil {
				return err
			}
			// Once up, the agent stops mapping the start-up code of the
			// whole binary (see releaseImagePages).
			go func() {
				select {
				case <-a.BecameReady():
				case <-cmd.Context().Done():
					return
				}
				released, err := releaseImagePages()
				if err != nil {
					klog.ErrorS(err, "Unmapping the executable's start-up pages")
					return
				}
				if released == 0 {
					klog.InfoS("Found no mapping of the executable to release; its start-up pages stay mapped")
					return
				}
				klog.V(2).InfoS("Unmapped the executable's start-up pages", "bytes", released)
			}()
			return a.Run(cmd.Context())
		},
	}
	api.add(cmd.Flags(), "kubeconfig of the API server (for example one written by: portal kubeconfig --user system:node:NAME --group system:nodes)")
	addAgentFlags(cmd.Flags(), &o)
	cmd.AddCommand(newAgentInitCommand())
	return cmd
}

// newAgentInitCommand is the hidden init helper the agent starts every pod
// process through (see agent/container.InitMain).
func newAgentInitCommand() *cobra.Command {
	return &cobra.Command{
		Use:                "init",
		Short:              "internal: set up a pod process's mounts, then exec its command",
		Hidden:             true,
		DisableFlagParsing: true,
		Run: func(cmd *cobra.Command, args []string) {
			err := container.InitMain(args)
			fmt.Fprintf(os.Stderr, "portal agent init: %v\n", err)
			// As a container runtime reports a process it could not start.
			os.Exit(128)
		},
	}
}

type addrList struct{ p *[]netip.Addr }

func (l addrList) String() string {
	var s []string
	for _, a := range *l.p {
		s = append(s, a.String())
	}
	return strings.Join(s, ",")
}
func (l addrList) Set(v string) error {
	*l.p = nil
	for _, f := range strings.Split(v, ",") {
		if f = strings.TrimSpace(f); f == "" {
			continue
		}
		a, err := netip.ParseAddr(f)
		if err != nil {
			return err
		}
		*l.p = append(*l.p, a)
	}
	return nil
}
func (addrList) Type() string { return "ips" }

type labelMap struct{ p *map[string]string }

func (m labelMap) String() string {
	var s []string
	for k, v := range *m.p {
		s = append(s, k+"="+v)
	}
	return strings.Join(s, ",")
}
func (m labelMap) Set(v string) error {
	if *m.p == nil {
		*m.p = map[string]string{}
	}
	for _, f := range strings.Split(v, ",") {
		if f = strings.TrimSpace(f); f == "" {
			continue
		}
		k, val, ok := strings.Cut(f, "=")
		if !ok || k == "" {
			return fmt.Errorf("label %q: want key=value", f)
		}
		(*m.p)[k] = val
	}
	return nil
}
func (labelMap) Type() string { return "mapStringString" }

// eventClient is the agent's client for Events: kubelet's --event-qps 50
// and --event-burst 100, apart from the limit its status writes use.
func eventClient(cfg *rest.Config) (kubernetes.Interface, error) {
	c := rest.CopyConfig(cfg)
	c.QPS, c.Burst = 50, 100
	return kubernetes.NewForConfig(c)
}
