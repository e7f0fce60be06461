package main

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"k8s.io/component-base/metrics/legacyregistry"

	"portal.dev/portal/controller/manager"
)

func addControllerFlags(fs *pflag.FlagSet, o *manager.Options) {
	fs.BoolVar(&o.LeaderElect, "leader-elect", o.LeaderElect, "campaign for the controller-manager Lease; only the leader runs controllers")
	fs.DurationVar(&o.LeaseDuration, "leader-elect-lease-duration", o.LeaseDuration, "how long a leader's Lease lasts without renewal")
	fs.DurationVar(&o.RenewDeadline, "leader-elect-renew-deadline", o.RenewDeadline, "how long the leader keeps trying to renew before it steps down")
	fs.DurationVar(&o.RetryPeriod, "leader-elect-retry-period", o.RetryPeriod, "how often replicas try to acquire or renew the Lease")
	fs.StringVar(&o.Identity, "identity", o.Identity, "this replica's name in the leader Lease (default: host name and a random suffix)")
	fs.IntVar(&o.MaxEndpointsPerSlice, "max-endpoints-per-slice", o.MaxEndpointsPerSlice, "most endpoints in one EndpointSlice")
	fs.StringVar(&o.LoadBalancerIPPools, "loadbalancer-ip-pools", o.LoadBalancerIPPools, "CIDRs and ranges (192.0.2.10-192.0.2.20) LoadBalancer Services take IPs from; empty gives them the addresses of the ready nodes, one Service per port")
	fs.StringVar(&o.LoadBalancerReservedPorts, "loadbalancer-reserved-ports", o.LoadBalancerReservedPorts, "ports (80/TCP,443/TCP) another process listens on at the nodes' addresses, such as an Ingress controller; without pools, a LoadBalancer Service asking for one stays pending")
	fs.DurationVar(&o.NodeMonitorGracePeriod, "node-monitor-grace-period", o.NodeMonitorGracePeriod, "how long a node may miss Lease renewals before it is marked Unknown and its pods not ready")
	fs.StringVar(&o.ClusterCIDR, "cluster-cidr", o.ClusterCIDR, "pod address ranges (v4,v6) node IPAM gives each Node a podCIDR from; empty turns node IPAM off")
	fs.IntVar(&o.NodeCIDRMaskSizeIPv4, "node-cidr-mask-size-ipv4", o.NodeCIDRMaskSizeIPv4, "prefix length of a node's IPv4 podCIDR")
	fs.IntVar(&o.NodeCIDRMaskSizeIPv6, "node-cidr-mask-size-ipv6", o.NodeCIDRMaskSizeIPv6, "prefix length of a node's IPv6 podCIDR")
	fs.IntVar(&o.TerminatedPodGCThreshold, "terminated-pod-gc-threshold", o.TerminatedPodGCThreshold, "how many terminated pods to keep before the pod garbage collector deletes the oldest; 0 or less keeps them all")
	fs.IntVar(&o.Workers, "concurrent-syncs", o.Workers, "workers per controller")
}

func newControllerManagerCommand() *cobra.Command {
	o := manager.DefaultOptions()
	var api apiFlags
	metricsAddr := "127.0.0.1:10257"
	cmd := &cobra.Command{
		Use:   "controller-manager",
		Short: "Run the controllers (EndpointSlices, Endpoints, mirroring, garbage collection, LoadBalancer IPs), leader-elected",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := o.Validate(); err != nil {
				return err
			}
			cfg, err := componentConfig(cmd.Context(), api, "")
			if err != nil {
				return err
			}
			// The manager's clients pick their own encodings (the dynamic
			// and metadata clients speak JSON).
			cfg.ContentType, cfg.AcceptContentTypes = "", ""
			mgr := manager.New(cfg, o)
			if metricsAddr != "" {
				if err := serveMetrics(cmd.Context(), metricsAddr, mgr); err != nil {
					return err
				}
			}
			return mgr.Run(cmd.Context())
		},
	}
	cmd.Flags().StringVar(&metricsAddr, "metrics-bind-address", metricsAddr, "address for /metrics and /healthz (plain HTTP; empty disables)")
	api.add(cmd.Flags(), "kubeconfig of the API server (for example one written by: portal kubeconfig --user system:kube-controller-manager)")
	addControllerFlags(cmd.Flags(), &o)
	return cmd
}

// serveMetrics serves the controllers' Prometheus metrics and a health
// check until ctx ends. Plain HTTP, so keep it on loopback or a trusted
// network (kube-controller-manager serves the same over HTTPS).
func serveMetrics(ctx context.Context, addr string, mgr *manager.Manager) error {
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("--metrics-bind-address: %w", err)
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", legacyregistry.Handler())
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, r *http.Request) {
		if !mgr.Ready() {
			http.Error(w, "controllers not synced", http.StatusServiceUnavailable)
			return
		}
		fmt.Fprint(w, "ok")
	})
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go srv.Serve(l)
	go func() {
		<-ctx.Done()
		srv.Close()
	}()
	return nil
}
