package main

import (
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"portal.dev/portal/proxy"
)

// addProxyFlags adds the proxy's flags (kube-proxy's names) to fs.
func addProxyFlags(fs *pflag.FlagSet, o *proxy.Options) {
	fs.StringVar(&o.Mode, "proxy-mode", o.Mode, "how Services are proxied: nftables, iptables, or userspace (a Go L4 proxy; the one mode that runs without root)")
	fs.StringVar(&o.HostnameOverride, "hostname-override", o.HostnameOverride, "this node's name in the API (default: the host name, lower-cased)")
	fs.StringSliceVar(&o.NodePortAddresses, "nodeport-addresses", o.NodePortAddresses, "addresses that accept NodePort traffic: CIDRs, \"primary\" (the node's primary IPs) or \"all\" (default: all local addresses)")
	fs.StringVar(&o.ClusterCIDR, "cluster-cidr", o.ClusterCIDR, "pod CIDRs (v4,v6); traffic from outside them to a cluster IP is masqueraded (empty: unknown)")
	fs.BoolVar(&o.MasqueradeAll, "masquerade-all", o.MasqueradeAll, "masquerade all traffic to cluster IPs")
	fs.DurationVar(&o.MinSyncPeriod, "min-sync-period", o.MinSyncPeriod, "syncs of the rules are limited to one per this period after a burst of two; changes in between are batched; 100ms in userspace mode unless given")
	fs.DurationVar(&o.SyncPeriod, "sync-period", o.SyncPeriod, "how often the proxy syncs whether or not anything changed; every rule is rewritten on the first periodic sync after an hour")
	fs.StringVar(&o.HealthzBindAddress, "healthz-bind-address", o.HealthzBindAddress, "address of /healthz and /livez (empty disables)")
	fs.StringVar(&o.MetricsBindAddress, "metrics-bind-address", o.MetricsBindAddress, "address of /metrics (empty disables)")
	fs.StringVar(&o.Scheduler, "scheduler", o.Scheduler, "userspace mode: how endpoints are chosen: rr, random, lc, sh, dh, sed, nq or maglev (default rr; per Service: annotation portal.dev/scheduler)")
	fs.DurationVar(&o.DrainTimeout, "drain-timeout", o.DrainTimeout, "userspace mode: how long connections to an endpoint that left may go on before they are closed (default 30s)")
	fs.BoolVar(&o.Cleanup, "cleanup", o.Cleanup, "remove every rule any Portal proxy mode wrote, then exit")
}

// proxyModeDefaults gives --min-sync-period, when not given, the default
// of the chosen --proxy-mode.
func proxyModeDefaults(fs *pflag.FlagSet, o *proxy.Options) {
	if !fs.Changed("min-sync-period") {
		o.MinSyncPeriod = proxy.DefaultMinSyncPeriod(o.Mode)
	}
}

func newProxyCommand() *cobra.Command {
	o := proxy.DefaultOptions()
	var api apiFlags
	cmd := &cobra.Command{
		Use:   "proxy",
		Short: "Run the service proxy for this node (userspace, nftables or iptables mode), or stand in for kube-proxy",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			proxyModeDefaults(cmd.Flags(), &o)
			if err := o.Validate(); err != nil {
				return err
			}
			if o.Cleanup {
				return proxy.CleanupAll(cmd.Context())
			}
			// Every node pays the proxy's memory. Its heap is mostly state
			// that changes slowly, and a full sync makes as much garbage
			// again (the ruleset as objects and text), which Go's default
			// lets grow to twice the live heap before collecting.
			collectGarbageSooner()
			_, client, err := componentClient(cmd.Context(), api, "portal-proxy")
			if err != nil {
				return err
			}
			p, err := proxy.New(client, o)
			if err != nil {
				return err
			}
			return p.Run(cmd.Context())
		},
	}
	api.add(cmd.Flags(), "kubeconfig of the API server (one from: portal kubeconfig --user system:kube-proxy)")
	addProxyFlags(cmd.Flags(), &o)
	return cmd
}
