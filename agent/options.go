package agent

import (
	"fmt"
	"net"
	"net/netip"
	"os"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes"

	"portal.dev/portal/internal/nodelabels"
)

// Options configure an Agent. DefaultOptions fills in what kubelet
// defaults.
type Options struct {
	// NodeName is the Node this agent is (--hostname-override; default
	// the host name, lower case).
	NodeName string
	// NodeIPs are the node's addresses, at most one per family (--node-ip;
	// default: the first non-loopback address).
	NodeIPs []netip.Addr
	// NodeLabels are added to the Node's labels (--node-labels).
	NodeLabels map[string]string
	// PodCIDRs are the node's pod ranges (--pod-cidr); empty waits for
	// spec.podCIDRs from node IPAM.
	PodCIDRs []netip.Prefix
	// ClusterCIDRs are the cluster's pod ranges (--cluster-cidr); traffic
	// to them is not masqueraded. Empty: every Node's pod CIDRs.
	ClusterCIDRs []netip.Prefix
	// ClusterDomain and ClusterDNS make the pods' resolv.conf.
	ClusterDomain string
	ClusterDNS    []netip.Addr
	// RootDir holds the agent's state: address allocations, the pods'
	// files and logs, the processes to re-adopt after a restart.
	RootDir string
	// HealthzBindAddress serves /healthz over plain HTTP; "" disables it.
	HealthzBindAddress string
	// Port is the HTTPS port of the log endpoint (kubelet's 10250); 0
	// disables it.
	Port int
	// ClientCAData are the PEM certificates that sign the clients the log
	// endpoint accepts (the cluster CA, from the kubeconfig).
	ClientCAData []byte
	// ProxyStatusAddress is where this node's service proxy serves its
	// status (its --metrics-bind-address); the agent forwards
	// /proxystatus/ there for portal explain. "" disables it.
	ProxyStatusAddress string
	// IngressHTTPAddress and IngressHTTPSAddress are where this node's
	// Ingress controller listens (HOST:PORT of its --http-port and
	// --https-port); the agent's /httpprobe sends portal explain's
	// requests there and nowhere else. "" disables the scheme.
	IngressHTTPAddress, IngressHTTPSAddress string
	// IngressStatusAddress is where an Ingress controller on this node
	// serves its metrics (its --metrics-bind-address); the agent forwards
	// /ingressstatus/backends there for the service map. "" (the
	// default: most nodes run none) disables it.
	IngressStatusAddress string
	// MaxPods is the node's pod capacity.
	MaxPods int
	// LeaseDuration is the node Lease's duration; it is renewed every
	// quarter of it (40s and 10s, as kubelet).
	LeaseDuration time.Duration
	// StatusReportFrequency is how often an unchanged node status is
	// written again.
	StatusReportFrequency time.Duration
	// ResolvConf is the node's resolver configuration, for dnsPolicy
	// Default and the search path of ClusterFirst.
	ResolvConf string
	// InitPath is the init helper binary (this portal binary).
	InitPath string
	// CgroupRoot is where the node's cgroup file systems are mounted as
	// the agent sees them (--cgroup-root; /sys/fs/cgroup). An agent
	// started in a mount namespace with a sysfs of its own (`ip netns
	// exec`) reaches the node's through another process's root, e.g.
	// /proc/PID/root/sys/fs/cgroup.
	CgroupRoot string
	// EventClient writes the agent's Events about pods, with a rate limit
	// of its own so that they never hold up status writes (as kubelet's
	// event client). nil: the agent's own client.
	EventClient kubernetes.Interface
	// KubeAPIQPS and KubeAPIBurst limit the agent's requests to the API
	// server (kubelet's --kube-api-qps 50 and --kube-api-burst 100).
	// client-go's own default, 5 per second, is far too low for a node
	// that starts many pods at once: their status writes would queue.
	KubeAPIQPS   float32
	KubeAPIBurst int
	// Runtime runs the pods' processes; nil: agent/container's processes
	// in Linux namespaces. Tests of the pod loop give a fake.
	Runtime Runtime
	// NewNetwork makes the node's pod network once its pod CIDRs are
	// known; nil: agent/podnet's bridge and veths.
	NewNetwork func(NetworkConfig) Network
}

// DefaultOptions returns kubelet's defaults.
func DefaultOptions() Options {
	host, _ := os.Hostname()
	root := "/var/lib/portal/agent"
	if os.Geteuid() != 0 {
		if d, err := os.UserCacheDir(); err == nil {
			root = d + "/portal/agent"
		}
	}
	self, _ := os.Executable()
	return Options{
		NodeName:              strings.ToLower(host),
		ClusterDomain:         "cluster.local",
		ClusterDNS:            []netip.Addr{netip.MustParseAddr("10.96.0.10")},
		RootDir:               root,
		HealthzBindAddress:    "127.0.0.1:10248",
		Port:                  10250,
		ProxyStatusAddress:    "127.0.0.1:10249",
		MaxPods:               110,
		LeaseDuration:         40 * time.Second,
		StatusReportFrequency: time.Minute,
		ResolvConf:            "/etc/resolv.conf",
		InitPath:              self,
		CgroupRoot:            "/sys/fs/cgroup",
		KubeAPIQPS:            50,
		KubeAPIBurst:          100,
	}
}

// Validate reports options that cannot work.
func (o *Options) Validate() error {
	if o.NodeName == "" {
		return fmt.Errorf("no node name: set --hostname-override")
	}
	if o.RootDir == "" {
		return fmt.Errorf("--root-dir is required")
	}
	if err := oneEach(o.NodeIPs, func(a netip.Addr) bool { return a.Is4() }); err != nil {
		return fmt.Errorf("--node-ip: %w", err)
	}
	if err := oneEach(o.PodCIDRs, func(p netip.Prefix) bool { return p.Addr().Is4() }); err != nil {
		return fmt.Errorf("--pod-cidr: %w", err)
	}
	if bad := nodelabels.Forbidden(nodelabels.Modified(o.NodeLabels, nil)); len(bad) > 0 {
		// The API server's NodeRestriction would refuse the Node, so the
		// agent would never register; say so now, as kubelet does.
		return fmt.Errorf("--node-labels: a node may not set %s on itself: only labels outside kubernetes.io and k8s.io, under kubelet.kubernetes.io/ or node.kubernetes.io/, or the kubelet's own (such as %s); an administrator sets the others with kubectl label",
			strings.Join(bad, ", "), corev1.LabelTopologyZone)
	}
	if o.LeaseDuration <= 0 {
		o.LeaseDuration = 40 * time.Second
	}
	if o.StatusReportFrequency <= 0 {
		o.StatusReportFrequency = time.Minute
	}
	if o.MaxPods <= 0 {
		o.MaxPods = 110
	}
	return nil
}

func oneEach[T any](xs []T, is4 func(T) bool) error {
	switch {
	case len(xs) > 2:
		return fmt.Errorf("at most one IPv4 and one IPv6 value")
	case len(xs) == 2 && is4(xs[0]) == is4(xs[1]):
		return fmt.Errorf("two values of the same family")
	}
	return nil
}

// DefaultNodeIPs, the node addresses when --node-ip is not given, are the
// first global unicast address of an up, non-loopback
// interface, IPv4 first.
func DefaultNodeIPs() []netip.Addr {
	ifaces, _ := net.Interfaces()
	var v6 netip.Addr
	for _, ifc := range ifaces {
		if ifc.Flags&net.FlagUp == 0 || ifc.Flags&net.FlagLoopback != 0 {
			continue
		}
		addrs, _ := ifc.Addrs()
		for _, a := range addrs {
			ipn, ok := a.(*net.IPNet)
			if !ok {
				continue
			}
			ip, ok := netip.AddrFromSlice(ipn.IP)
			if !ok || !ip.IsGlobalUnicast() {
				continue
			}
			ip = ip.Unmap()
			if ip.Is4() {
				return []netip.Addr{ip}
			}
			if !v6.IsValid() {
				v6 = ip
			}
		}
	}
	if v6.IsValid() {
		return []netip.Addr{v6}
	}
	return nil
}
