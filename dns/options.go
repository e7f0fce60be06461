package dns

import (
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"strings"
	"time"

	"github.com/miekg/dns"

	"portal.dev/portal/dns/answer"
)

// Options configure the DNS server. The zero value is usable: it serves
// cluster.local on 127.0.0.1 on a port the kernel picks, forwards to the
// nameservers of /etc/resolv.conf and runs no health or metrics endpoint.
// DefaultOptions holds the flag defaults.
type Options struct {
	// BindAddresses are the IPv4 and IPv6 addresses to serve UDP and TCP
	// on (--dns-bind-address; empty: 127.0.0.1).
	BindAddresses []string
	// Port is the UDP and TCP port (--dns-port; 0: one the kernel picks).
	Port int
	// ClusterDomain is the cluster zone (--cluster-domain; empty: cluster.local).
	ClusterDomain string
	// Upstream are the servers for names outside the cluster zone
	// (--upstream): IP, IP:port, or a resolv.conf-style file whose
	// nameservers to use; "none" answers REFUSED instead. Empty: the
	// nameservers of /etc/resolv.conf. Addresses this server listens on
	// are always left out.
	Upstream []string
	// TTL of every cluster record and of negative answers (--dns-ttl;
	// 0: 5s).
	TTL time.Duration
	// Pods is the pod record mode: insecure, verified or disabled (--pods;
	// empty: insecure).
	Pods string
	// HealthBindAddress serves /health, as CoreDNS's health plugin does,
	// and /ready as well, for probes written against this port
	// (--health-bind-address; empty: none).
	HealthBindAddress string
	// ReadyBindAddress serves /ready on a port of its own, as CoreDNS's
	// ready plugin does on 8181, for readiness probes that expect it
	// there (--ready-bind-address; empty: none).
	ReadyBindAddress string
	// MetricsBindAddress serves /metrics (--metrics-bind-address; empty: none).
	MetricsBindAddress string
	// CacheSize is how many upstream answers the forwarder caches
	// (--dns-cache-size; 0: 10000, negative: no cache).
	CacheSize int
}

// DefaultOptions returns the options `portal dns` starts from.
func DefaultOptions() Options {
	return Options{
		BindAddresses:      []string{"127.0.0.1"},
		Port:               53,
		ClusterDomain:      "cluster.local",
		TTL:                5 * time.Second,
		Pods:               "insecure",
		HealthBindAddress:  "127.0.0.1:8080",
		ReadyBindAddress:   "127.0.0.1:8181",
		MetricsBindAddress: "127.0.0.1:9153",
		CacheSize:          10000,
	}
}

// withDefaults fills in the zero fields.
func (o Options) withDefaults() Options {
	if len(o.BindAddresses) == 0 {
		o.BindAddresses = []string{"127.0.0.1"}
	}
	if o.ClusterDomain == "" {
		o.ClusterDomain = "cluster.local"
	}
	if o.TTL == 0 {
		o.TTL = 5 * time.Second
	}
	if o.Pods == "" {
		o.Pods = "insecure"
	}
	if o.CacheSize == 0 {
		o.CacheSize = 10000
	}
	return o
}

// Validate checks the options and names the flag of the first bad one.
func (o Options) Validate() error {
	o = o.withDefaults()
	for _, a := range o.BindAddresses {
		if _, err := netip.ParseAddr(a); err != nil {
			return fmt.Errorf("--dns-bind-address %q: not an IP address", a)
		}
	}
	if o.Port < 0 || o.Port > 65535 {
		return fmt.Errorf("--dns-port %d: must be 0-65535", o.Port)
	}
	if _, ok := dns.IsDomainName(o.ClusterDomain); !ok || strings.Trim(o.ClusterDomain, ".") == "" {
		return fmt.Errorf("--cluster-domain %q: not a domain name", o.ClusterDomain)
	}
	if o.TTL < 0 || o.TTL > time.Hour || o.TTL%time.Second != 0 {
		return fmt.Errorf("--dns-ttl %v: must be whole seconds between 0 and 3600", o.TTL)
	}
	if _, err := podMode(o.Pods); err != nil {
		return err
	}
	for _, u := range o.Upstream {
		if u == "none" {
			if len(o.Upstream) > 1 {
				return fmt.Errorf("--upstream none: cannot be combined with servers")
			}
			continue
		}
		if _, err := upstreamAddr(u); err != nil && !strings.HasPrefix(u, "/") {
			return fmt.Errorf("--upstream %q: %v", u, err)
		}
	}
	for flag, a := range o.httpAddresses() {
		if a == "" {
			continue
		}
		if _, _, err := net.SplitHostPort(a); err != nil {
			return fmt.Errorf("%s %q: %v", flag, a, err)
		}
	}
	return nil
}

func podMode(s string) (answer.PodMode, error) {
	switch s {
	case "", "insecure":
		return answer.PodsInsecure, nil
	case "verified":
		return answer.PodsVerified, nil
	case "disabled":
		return answer.PodsDisabled, nil
	}
	return 0, fmt.Errorf("--pods %q: must be insecure, verified or disabled", s)
}

// upstreamAddr turns "IP" or "IP:port" into "IP:port".
func upstreamAddr(u string) (string, error) {
	if ip, err := netip.ParseAddr(u); err == nil {
		return net.JoinHostPort(ip.String(), "53"), nil
	}
	ap, err := netip.ParseAddrPort(u)
	if err != nil {
		return "", fmt.Errorf("want an IP address, IP:port, a resolv.conf path or none")
	}
	return ap.String(), nil
}

// resolveUpstreams expands the --upstream list (files included) into
// host:port addresses, without this server's own.
func (o Options) resolveUpstreams(port int) ([]string, error) {
	list := o.Upstream
	if len(list) == 0 {
		list = []string{"/etc/resolv.conf"}
	}
	if len(list) == 1 && list[0] == "none" {
		return nil, nil
	}
	var out []string
	for _, u := range list {
		if strings.HasPrefix(u, "/") {
			cfg, err := dns.ClientConfigFromFile(u)
			if err != nil {
				return nil, fmt.Errorf("--upstream %s: %w", u, err)
			}
			for _, s := range cfg.Servers {
				out = append(out, net.JoinHostPort(s, cfg.Port))
			}
			continue
		}
		a, err := upstreamAddr(u)
		if err != nil {
			return nil, fmt.Errorf("--upstream %q: %w", u, err)
		}
		out = append(out, a)
	}
	return out, nil
}

// ttlSeconds is the TTL as DNS wants it.
func (o Options) ttlSeconds() uint32 { return uint32(o.TTL / time.Second) }

// TTLValue is a pflag value for --dns-ttl that takes seconds ("30", as
// CoreDNS's ttl option) or a duration ("30s").
type TTLValue struct{ D *time.Duration }

// String prints the TTL as a duration.
func (v TTLValue) String() string {
	if v.D == nil {
		return ""
	}
	return v.D.String()
}

// Set parses seconds or a duration.
func (v TTLValue) Set(s string) error {
	if n, err := strconv.Atoi(s); err == nil {
		*v.D = time.Duration(n) * time.Second
		return nil
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		return fmt.Errorf("want seconds or a duration: %w", err)
	}
	*v.D = d
	return nil
}

// Type names the value in help.
func (v TTLValue) Type() string { return "duration" }
