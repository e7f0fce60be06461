// Package resolvconf makes a pod's /etc/resolv.conf, /etc/hosts and host
// name the way kubelet does, per dnsPolicy and dnsConfig. It is pure: the
// node's own resolv.conf and hosts file come in as bytes, the files go out
// as bytes, and mounting them into the pod is the caller's business.
package resolvconf

import (
	"bytes"
	"fmt"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// Kubernetes' limits on a pod's resolver configuration (validation's
// MaxDNSNameservers, MaxDNSSearchPaths, MaxDNSSearchListChars): kubelet
// trims to them rather than failing the pod.
const (
	maxNameservers  = 3
	maxSearchPaths  = 32
	maxSearchLength = 2048
	maxHostnameLen  = 63
)

// File is a resolver configuration.
type File struct {
	Nameservers []string
	Searches    []string
	Options     []string
}

// Parse reads a resolv.conf: every nameserver line, the last search or
// domain line (without "." and trailing dots, as kubelet reads the node's
// file), and every option.
func Parse(data []byte) File {
	var f File
	for _, line := range strings.Split(string(data), "\n") {
		if i := strings.IndexAny(line, "#;"); i >= 0 {
			line = line[:i]
		}
		fields := strings.Fields(line)
		if len(fields) < 2 {
			continue
		}
		switch fields[0] {
		case "nameserver":
			f.Nameservers = append(f.Nameservers, fields[1])
		case "domain", "search":
			f.Searches = nil
			for _, s := range fields[1:] {
				if s != "." {
					f.Searches = append(f.Searches, strings.TrimSuffix(s, "."))
				}
			}
		case "options":
			f.Options = append(f.Options, fields[1:]...)
		}
	}
	return f
}

// Bytes renders f as a resolv.conf.
func (f File) Bytes() []byte {
	var b bytes.Buffer
	if len(f.Searches) > 0 {
		fmt.Fprintf(&b, "search %s\n", strings.Join(f.Searches, " "))
	}
	for _, ns := range f.Nameservers {
		fmt.Fprintf(&b, "nameserver %s\n", ns)
	}
	if len(f.Options) > 0 {
		fmt.Fprintf(&b, "options %s\n", strings.Join(f.Options, " "))
	}
	return b.Bytes()
}

// Config is the node's side of pod DNS.
type Config struct {
	// ClusterDomain is the cluster zone, e.g. cluster.local.
	ClusterDomain string
	// ClusterDNS are the cluster DNS server addresses; none makes
	// ClusterFirst fall back to the node's configuration, as in kubelet.
	ClusterDNS []string
	// Node is the node's own resolver configuration.
	Node File
}

// ForPod returns the resolver configuration of pod.
func ForPod(pod *corev1.Pod, cfg Config) File {
	var f File
	switch policy(pod, cfg) {
	case corev1.DNSNone:
	case corev1.DNSClusterFirst:
		f.Nameservers = append(f.Nameservers, cfg.ClusterDNS...)
		f.Searches = clusterSearches(pod.Namespace, cfg)
		f.Options = []string{"ndots:5"}
	default:
		f = File{
			Nameservers: append([]string(nil), cfg.Node.Nameservers...),
			Searches:    append([]string(nil), cfg.Node.Searches...),
			Options:     append([]string(nil), cfg.Node.Options...),
		}
	}
	if dc := pod.Spec.DNSConfig; dc != nil {
		f.Nameservers = unique(append(f.Nameservers, dc.Nameservers...))
		f.Searches = unique(append(f.Searches, dc.Searches...))
		f.Options = mergeOptions(f.Options, dc.Options)
	}
	return fitLimits(f)
}

// policy is the effective policy: ClusterFirst for a hostNetwork pod, or
// without a cluster DNS address, is Default; ClusterFirstWithHostNet is
// ClusterFirst.
func policy(pod *corev1.Pod, cfg Config) corev1.DNSPolicy {
	p := pod.Spec.DNSPolicy
	switch p {
	case corev1.DNSNone, corev1.DNSDefault:
		return p
	case corev1.DNSClusterFirstWithHostNet:
		p = corev1.DNSClusterFirst
	case corev1.DNSClusterFirst, "":
		if pod.Spec.HostNetwork {
			return corev1.DNSDefault
		}
		p = corev1.DNSClusterFirst
	}
	if len(cfg.ClusterDNS) == 0 {
		return corev1.DNSDefault
	}
	return p
}

func clusterSearches(ns string, cfg Config) []string {
	if cfg.ClusterDomain == "" {
		return append([]string(nil), cfg.Node.Searches...)
	}
	d := cfg.ClusterDomain
	return unique(append([]string{ns + ".svc." + d, "svc." + d, d}, cfg.Node.Searches...))
}

func unique(in []string) []string {
	seen := map[string]bool{}
	out := in[:0]
	for _, s := range in {
		if !seen[s] {
			seen[s] = true
			out = append(out, s)
		}
	}
	return out
}

// mergeOptions overrides options of the same name with the pod's; the
// result is sorted by name (kubelet leaves the order to map iteration).
func mergeOptions(existing []string, pod []corev1.PodDNSConfigOption) []string {
	m := map[string]string{}
	for _, o := range existing {
		name, value, _ := strings.Cut(o, ":")
		m[name] = value
	}
	for _, o := range pod {
		m[o.Name] = ""
		if o.Value != nil {
			m[o.Name] = *o.Value
		}
	}
	out := make([]string, 0, len(m))
	for name, value := range m {
		if value != "" {
			name += ":" + value
		}
		out = append(out, name)
	}
	sort.Strings(out)
	return out
}

func fitLimits(f File) File {
	if len(f.Nameservers) > maxNameservers {
		f.Nameservers = f.Nameservers[:maxNameservers]
	}
	if len(f.Searches) > maxSearchPaths {
		f.Searches = f.Searches[:maxSearchPaths]
	}
	for len(f.Searches) > 0 && len(strings.Join(f.Searches, " ")) > maxSearchLength {
		f.Searches = f.Searches[:len(f.Searches)-1]
	}
	return f
}

// Hostname returns the pod's host name (spec.hostname, else the pod name,
// cut to 63 characters without a trailing '-' or '.') and its domain
// (<subdomain>.<namespace>.svc.<cluster domain> with a subdomain, else "").
// With setHostnameAsFQDN the host name is the full name.
func Hostname(pod *corev1.Pod, clusterDomain string) (hostname, domain string) {
	hostname = pod.Name
	if pod.Spec.Hostname != "" {
		hostname = pod.Spec.Hostname
	}
	if len(hostname) > maxHostnameLen {
		hostname = strings.TrimRight(hostname[:maxHostnameLen], "-.")
	}
	if pod.Spec.Subdomain != "" && clusterDomain != "" {
		domain = fmt.Sprintf("%s.%s.svc.%s", pod.Spec.Subdomain, pod.Namespace, clusterDomain)
	}
	if pod.Spec.SetHostnameAsFQDN != nil && *pod.Spec.SetHostnameAsFQDN && domain != "" {
		hostname = hostname + "." + domain
	}
	return hostname, domain
}

// Hosts returns the pod's /etc/hosts: kubelet's managed file with the pod's
// addresses and names, and the pod's hostAliases. A hostNetwork pod gets the
// node's file (nodeHosts) with the aliases appended.
func Hosts(pod *corev1.Pod, podIPs []string, clusterDomain string, nodeHosts []byte) []byte {
	var b bytes.Buffer
	if pod.Spec.HostNetwork {
		b.Write(nodeHosts)
		if len(nodeHosts) > 0 && !bytes.HasSuffix(nodeHosts, []byte("\n")) {
			b.WriteByte('\n')
		}
	} else {
		b.WriteString("# Kubernetes-managed hosts file.\n")
		b.WriteString("127.0.0.1\tlocalhost\n")
		b.WriteString("::1\tlocalhost ip6-localhost ip6-loopback\n")
		b.WriteString("fe00::0\tip6-localnet\n")
		b.WriteString("fe00::0\tip6-mcastprefix\n")
		b.WriteString("fe00::1\tip6-allnodes\n")
		b.WriteString("fe00::2\tip6-allrouters\n")
		hostname, domain := Hostname(pod, clusterDomain)
		short, _, _ := strings.Cut(hostname, ".")
		for _, ip := range podIPs {
			if domain != "" {
				fmt.Fprintf(&b, "%s\t%s.%s\t%s\n", ip, short, domain, short)
			} else {
				fmt.Fprintf(&b, "%s\t%s\n", ip, short)
			}
		}
	}
	if len(pod.Spec.HostAliases) > 0 {
		b.WriteString("\n# Entries added by HostAliases.\n")
		for _, a := range pod.Spec.HostAliases {
			fmt.Fprintf(&b, "%s\t%s\n", a.IP, strings.Join(a.Hostnames, "\t"))
		}
	}
	return b.Bytes()
}
