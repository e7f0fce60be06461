package main

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"k8s.io/apiserver/pkg/server/healthz"
	"k8s.io/client-go/kubernetes"
	"k8s.io/klog/v2"

	"portal.dev/portal/agent"
	"portal.dev/portal/apiserver"
	"portal.dev/portal/apiserver/auth"
	"portal.dev/portal/controller/manager"
	"portal.dev/portal/dns"
	"portal.dev/portal/dns/publish"
	"portal.dev/portal/ingress"
	"portal.dev/portal/ingress/route"
	"portal.dev/portal/proxy"
)

// components are the parts `portal server` can run, in start order. Names
// that are not built yet are accepted by --disable, so scripts written for a
// later Portal keep working.
var components = []string{"apiserver", "controllers", "dns", "proxy", "agent", "ingress"}

// builtComponents are the ones this binary can run.
var builtComponents = []string{"apiserver", "controllers", "dns", "proxy", "agent", "ingress"}

func newServerCommand() *cobra.Command {
	o := apiserver.DefaultOptions()
	mo := manager.DefaultOptions()
	do := dns.DefaultOptions()
	ao := agent.DefaultOptions()
	po := proxy.DefaultOptions()
	ino := ingress.DefaultOptions()
	var disable []string
	cmd := &cobra.Command{
		Use:   "server",
		Short: "Run everything in one process: API server (embedded etcd) and the other components",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if slices.Contains(disable, "apiserver") {
				return fmt.Errorf("--disable apiserver: the server cannot run without its API")
			}
			enabled := func(c string) bool { return !slices.Contains(disable, c) }
			for _, c := range components {
				switch {
				case !enabled(c):
					klog.InfoS("Component disabled", "component", c)
				case !slices.Contains(builtComponents, c):
					klog.V(2).InfoS("Component not built into this version", "component", c)
				case c == "agent" && runtime.GOOS != "linux":
					// Without it no pod runs on this machine: say so
					// plainly (on Linux without root it is logged at -v=1).
					klog.InfoS("Component left out: the node agent needs Linux", "component", c, "os", runtime.GOOS)
				}
			}
			// A bad range fails the command before any component starts.
			if _, err := apiserver.ParseServiceCIDRs(o.ServiceClusterIPRange); err != nil {
				return err
			}
			if enabled("ingress") {
				// The class exists whenever this server runs an Ingress
				// controller; `portal apiserver` alone leaves classes to
				// the operator.
				o.IngressClass, o.IngressController = ino.IngressClass, route.ControllerName
			}
			// Flags several components share are registered once; copy them.
			do.ClusterDomain, ao.ClusterDomain = o.ClusterDomain, o.ClusterDomain
			clusterCIDRs, err := manager.ParseClusterCIDRs(mo.ClusterCIDR)
			if err != nil {
				return err
			}
			ao.ClusterCIDRs = clusterCIDRs
			if !cmd.Flags().Changed("root-dir") {
				ao.RootDir = filepath.Join(o.DataDir, "agent")
			}
			po.HostnameOverride, po.ClusterCIDR = ao.NodeName, mo.ClusterCIDR
			ino.NodeName = ao.NodeName
			// The etcd member is named for the node, so that two servers
			// of one name are told apart at join (see clusterjoin).
			o.Cluster.Name = ao.NodeName
			if err := o.ValidateCluster(); err != nil {
				return err
			}
			// Joining brings the cluster's CA, which the components'
			// credentials below come from.
			if err := apiserver.PrepareJoin(cmd.Context(), &o); err != nil {
				return err
			}
			settleProxyMode(cmd.Flags(), &po, runtime.GOOS == "linux" && os.Geteuid() == 0)
			so := serverOptions{api: o, controllers: mo, dns: do, agent: ao, proxy: po, ingress: ino}
			if enabled("ingress") { // the agent forwards the map's questions to this process's controller
				so.agent.IngressStatusAddress = localAddress(ino.MetricsBindAddress)
			}
			if enabled("agent") && enabled("dns") && agentPossible() {
				// Pods reach this DNS as the kube-dns Service: serve on the
				// node's address too, and publish it as an endpoint.
				nodeIPs := ao.NodeIPs
				if len(nodeIPs) == 0 {
					nodeIPs = agent.DefaultNodeIPs()
				}
				if len(nodeIPs) > 0 && len(ao.ClusterDNS) > 0 {
					if !cmd.Flags().Changed("dns-bind-address") {
						so.dns.BindAddresses = append(slices.Clone(so.dns.BindAddresses), nodeIPs[0].String())
					}
					so.publishDNS = &publish.Options{ServiceIP: ao.ClusterDNS[0], Address: nodeIPs[0],
						Port: do.Port, MetricsPort: publish.MetricsPort(do.MetricsBindAddress, nodeIPs[0]),
						Identity: ao.NodeName, NodeName: ao.NodeName}
				}
			}
			so.controllers.ReservedNodePorts = reservedNodePorts(so, enabled)
			return runServer(cmd.Context(), so, enabled)
		},
	}
	addAPIServerFlags(cmd.Flags(), &o)
	addControllerFlags(cmd.Flags(), &mo)
	addComponentFlags(cmd.Flags(), "dns", func(fs *pflag.FlagSet) { addDNSFlags(fs, &do) })
	addComponentFlags(cmd.Flags(), "agent", func(fs *pflag.FlagSet) { addAgentFlags(fs, &ao) })
	addComponentFlags(cmd.Flags(), "proxy", func(fs *pflag.FlagSet) {
		addProxyFlags(fs, &po)
		fs.MarkHidden("cleanup") // `portal proxy --cleanup` is a command of its own
	})
	addComponentFlags(cmd.Flags(), "ingress", func(fs *pflag.FlagSet) { addIngressFlags(fs, &ino) })
	cmd.Flags().StringSliceVar(&disable, "disable", nil, "components to leave out: "+fmt.Sprint(components[1:]))
	return cmd
}

// addComponentFlags adds a component's flags to `portal server`. A flag
// the server already has (the API server's --cluster-domain) is shared; a
// component's own endpoints (--bind-address, --metrics-bind-address,
// --health-bind-address, --port, --profiling) and outputs (--access-log)
// take the component's name as a prefix, as several components have them
// or could.
func addComponentFlags(fs *pflag.FlagSet, component string, add func(*pflag.FlagSet)) {
	own := pflag.NewFlagSet(component, pflag.ContinueOnError)
	add(own)
	own.VisitAll(func(f *pflag.Flag) {
		endpoint := f.Name == "port" || f.Name == "bind-address" || f.Name == "profiling" || f.Name == "access-log" ||
			strings.HasSuffix(f.Name, "-bind-address")
		switch {
		case fs.Lookup(f.Name) != nil && !endpoint:
			return
		case endpoint && !strings.HasPrefix(f.Name, component+"-"):
			f.Name = component + "-" + f.Name
			f.Usage = component + ": " + f.Usage
		}
		fs.AddFlag(f)
	})
}

// serverOptions are the options of every component `portal server` runs.
type serverOptions struct {
	api         apiserver.Options
	controllers manager.Options
	dns         dns.Options
	agent       agent.Options
	proxy       proxy.Options
	ingress     ingress.Options
	// publishDNS, when set, makes the DNS an endpoint of kube-dns.
	publishDNS *publish.Options
}

// runServer runs the API server and, each with its own client as if on
// another machine, the enabled components; /readyz waits for all of them.
// It returns when ctx ends or a component stops, once every component has
// stopped, in the order of the stages.
func runServer(ctx context.Context, so serverOptions, enabled func(string) bool) error {
	if enabled("ingress") {
		// The agent sends portal explain's requests through the Ingress
		// controller of this same process.
		so.agent.IngressHTTPAddress = listenerAddress(so.ingress.BindAddress, so.ingress.HTTPPort)
		so.agent.IngressHTTPSAddress = listenerAddress(so.ingress.BindAddress, so.ingress.HTTPSPort)
	}
	var start []starter
	for _, c := range []struct {
		name  string
		start starter
	}{
		{"dns", startDNS},
		{"proxy", startProxy},
		{"agent", startAgent},
		{"ingress", startIngress},
		{"controllers", startControllers},
	} {
		if enabled(c.name) {
			start = append(start, c.start)
		}
	}
	return runComponents(ctx, so, start)
}

// A starter builds one component of `portal server`, adds its check to
// the API server's /readyz and starts it in its stage.
type starter func(*stages, serverOptions, *apiserver.Options) error

// runComponents starts the components, then the API server, and waits
// as runServer does.
func runComponents(ctx context.Context, so serverOptions, start []starter) error {
	s := newStages(ctx)
	o := so.api
	for _, start := range start {
		if err := start(s, so, &o); err != nil {
			s.stop()
			return err
		}
	}
	s.run(apiStage, func(ctx context.Context) error { return apiserver.Run(ctx, o) })
	return s.wait(ctx)
}

// startDNS starts the cluster DNS and, when asked, its publisher of the
// kube-dns endpoint.
func startDNS(s *stages, so serverOptions, o *apiserver.Options) error {
	if err := so.dns.Validate(); err != nil {
		return err
	}
	client, err := serverClient(*o, "system:kube-dns")
	if err != nil {
		return err
	}
	srv, err := dns.New(client, so.dns)
	if err != nil {
		return err
	}
	o.ExtraReadyChecks = append(o.ExtraReadyChecks, readyCheck("dns", srv.Ready))
	s.run(nodeStage, srv.Run)
	if so.publishDNS != nil {
		po := *so.publishDNS
		po.Ready = srv.Ready
		pub := publish.New(client, po)
		s.run(nodeStage, func(ctx context.Context) error {
			// Publishing may end early (another DNS serves kube-dns);
			// only its errors stop the server.
			if err := pub.Run(ctx); err != nil {
				return err
			}
			<-ctx.Done()
			return nil
		})
	}
	return nil
}

// startProxy starts the service proxy of this node.
func startProxy(s *stages, so serverOptions, o *apiserver.Options) error {
	if err := so.proxy.Validate(); err != nil {
		return err
	}
	client, err := serverClient(*o, "system:kube-proxy")
	if err != nil {
		return err
	}
	p, err := proxy.New(client, so.proxy)
	if err != nil {
		return err
	}
	o.ExtraReadyChecks = append(o.ExtraReadyChecks, readyCheck("proxy", p.Ready))
	s.run(nodeStage, p.Run)
	return nil
}

// startAgent starts the node agent where this process can run pods.
func startAgent(s *stages, so serverOptions, o *apiserver.Options) error {
	if !agentPossible() {
		return nil
	}
	ao := so.agent
	// The agent forwards explain's questions to the proxy of this same
	// process, wherever its metrics are served.
	ao.ProxyStatusAddress = localAddress(so.proxy.MetricsBindAddress)
	if err := ao.Validate(); err != nil {
		return err
	}
	nodeUser := auth.NodeUserPrefix + ao.NodeName
	cfg, err := apiserver.ComponentConfig(*o, nodeUser, auth.DefaultGroups(nodeUser)...)
	if err != nil {
		return err
	}
	ao.ClientCAData = cfg.TLSClientConfig.CAData
	cfg.QPS, cfg.Burst = ao.KubeAPIQPS, ao.KubeAPIBurst
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	if ao.EventClient, err = eventClient(cfg); err != nil {
		return err
	}
	a, err := agent.New(client, ao)
	if err != nil {
		return err
	}
	o.ExtraReadyChecks = append(o.ExtraReadyChecks, readyCheck("agent", a.Ready))
	s.run(nodeStage, a.Run)
	return nil
}

// startIngress starts the Ingress controller. Ports it cannot bind (80
// and 443 need root or CAP_NET_BIND_SERVICE) leave it out with one log
// line saying how to fix it, and the other components keep running: a
// server started by a user to try Services out should not fail for want
// of the HTTP ports.
func startIngress(s *stages, so serverOptions, o *apiserver.Options) error {
	if err := so.ingress.Validate(); err != nil {
		return err
	}
	client, err := serverClient(*o, "system:portal-ingress")
	if err != nil {
		return err
	}
	c, err := ingress.New(client, so.ingress)
	if err != nil {
		return err
	}
	var leftOut atomic.Bool
	o.ExtraReadyChecks = append(o.ExtraReadyChecks, readyCheck("ingress", func() bool { return leftOut.Load() || c.Ready() }))
	s.run(nodeStage, func(ctx context.Context) error {
		err := c.Run(ctx)
		var bind *ingress.BindError
		if !errors.As(err, &bind) {
			return err
		}
		leftOut.Store(true)
		klog.ErrorS(bind.Err, "Ingress controller left out: cannot listen on its port; choose other ports with --http-port and --https-port, or leave it out with --disable ingress",
			"address", bind.Addr, "flag", bind.Flag)
		<-ctx.Done()
		return nil
	})
	return nil
}

// startControllers starts the controller manager.
func startControllers(s *stages, so serverOptions, o *apiserver.Options) error {
	mo := so.controllers
	if err := mo.Validate(); err != nil {
		return err
	}
	cfg, err := apiserver.ComponentConfig(*o, "system:kube-controller-manager")
	if err != nil {
		return err
	}
	if mo.Identity == "" {
		// Stable across restarts of this server, so it takes its Lease
		// back at once instead of waiting for the old one to expire.
		host, _ := os.Hostname()
		mo.Identity = fmt.Sprintf("%s_%x", host, sha256.Sum256([]byte(o.DataDir)))[:len(host)+17]
	}
	mgr := manager.New(cfg, mo)
	o.ExtraReadyChecks = append(o.ExtraReadyChecks, readyCheck("controllers", mgr.Ready))
	s.run(controllerStage, mgr.Run)
	return nil
}

// serverClient is a clientset of the API server o describes, for a
// component of `portal server` acting as user.
func serverClient(o apiserver.Options, user string) (kubernetes.Interface, error) {
	cfg, err := apiserver.ComponentConfig(o, user)
	if err != nil {
		return nil, err
	}
	return kubernetes.NewForConfig(cfg)
}

// agentPossible says whether this process can run pods: the agent needs
// root on Linux for namespaces, bridges and mounts.
func agentPossible() bool {
	if runtime.GOOS != "linux" || os.Geteuid() != 0 {
		klog.V(1).InfoS("Not running the node agent: it needs root on Linux", "os", runtime.GOOS, "uid", os.Geteuid())
		return false
	}
	return true
}

// settleProxyMode switches the proxy to the userspace mode when the
// kernel modes cannot run (they need root on Linux; the userspace mode
// then serves NodePorts only), then gives the flags not set the defaults
// of the mode it settled on.
func settleProxyMode(fs *pflag.FlagSet, o *proxy.Options, kernelModes bool) {
	if !kernelModes && o.Mode != proxy.ModeUserspace {
		klog.InfoS("Kernel proxy modes need root on Linux; running the userspace proxy instead", "requested", o.Mode, "os", runtime.GOOS, "uid", os.Geteuid())
		o.Mode = proxy.ModeUserspace
	}
	proxyModeDefaults(fs, o)
}

// readyCheck is a /readyz check that passes once ready says so.
func readyCheck(name string, ready func() bool) healthz.HealthChecker {
	return healthz.NamedCheck(name, func(*http.Request) error {
		if !ready() {
			return fmt.Errorf("%s not synced", name)
		}
		return nil
	})
}

// listenerAddress is where this host reaches a listener bound to bind
// ("" for every address) and port, or "" for port 0 (not served).
func listenerAddress(bind string, port int) string {
	if port == 0 {
		return ""
	}
	return localAddress(net.JoinHostPort(bind, strconv.Itoa(port)))
}

// localAddress turns a bind address into one to dial on this host: an
// unspecified host (0.0.0.0, ::, "") becomes loopback.
func localAddress(bind string) string {
	host, port, err := net.SplitHostPort(bind)
	if err != nil || bind == "" {
		return bind
	}
	if ip, err := netip.ParseAddr(host); host == "" || (err == nil && ip.IsUnspecified()) {
		host = "127.0.0.1"
		if err == nil && ip.Is6() {
			host = "::1"
		}
	}
	return net.JoinHostPort(host, port)
}
