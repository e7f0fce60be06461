package resolvconf

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

const nodeResolv = `# generated
nameserver 192.0.2.53
nameserver 192.0.2.54 ; second
search corp.example. lab.example
options edns0 timeout:2
`

func TestParse(t *testing.T) {
	f := Parse([]byte(nodeResolv + "domain ignored.example\nsearch final.example .\n"))
	want := File{Nameservers: []string{"192.0.2.53", "192.0.2.54"}, Searches: []string{"final.example"}, Options: []string{"edns0", "timeout:2"}}
	if got, want := string(f.Bytes()), string(want.Bytes()); got != want {
		t.Errorf("got %q, want %q", got, want)
	}
}

func TestForPod(t *testing.T) {
	cfg := Config{ClusterDomain: "cluster.local", ClusterDNS: []string{"10.96.0.10"}, Node: Parse([]byte(nodeResolv))}
	pod := func(policy corev1.DNSPolicy, hostNet bool, dc *corev1.PodDNSConfig) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "app", Name: "p"},
			Spec: corev1.PodSpec{DNSPolicy: policy, HostNetwork: hostNet, DNSConfig: dc}}
	}
	clusterFirst := "search app.svc.cluster.local svc.cluster.local cluster.local corp.example lab.example\nnameserver 10.96.0.10\noptions ndots:5\n"
	nodeFile := "search corp.example lab.example\nnameserver 192.0.2.53\nnameserver 192.0.2.54\noptions edns0 timeout:2\n"
	cases := []struct {
		name string
		pod  *corev1.Pod
		cfg  Config
		want string
	}{
		{"ClusterFirst", pod(corev1.DNSClusterFirst, false, nil), cfg, clusterFirst},
		{"empty policy is ClusterFirst", pod("", false, nil), cfg, clusterFirst},
		{"ClusterFirst on the host network is Default", pod(corev1.DNSClusterFirst, true, nil), cfg, nodeFile},
		{"ClusterFirstWithHostNet", pod(corev1.DNSClusterFirstWithHostNet, true, nil), cfg, clusterFirst},
		{"ClusterFirst without cluster DNS is Default", pod(corev1.DNSClusterFirst, false, nil),
			Config{ClusterDomain: "cluster.local", Node: cfg.Node}, nodeFile},
		{"Default", pod(corev1.DNSDefault, false, nil), cfg, nodeFile},
		{"None with dnsConfig", pod(corev1.DNSNone, false, &corev1.PodDNSConfig{
			Nameservers: []string{"1.1.1.1"}, Searches: []string{"a.example"},
			Options: []corev1.PodDNSConfigOption{{Name: "ndots", Value: ptr.To("2")}, {Name: "rotate"}}}), cfg,
			"search a.example\nnameserver 1.1.1.1\noptions ndots:2 rotate\n"},
		{"None without dnsConfig is empty", pod(corev1.DNSNone, false, nil), cfg, ""},
		{"dnsConfig merges into ClusterFirst", pod(corev1.DNSClusterFirst, false, &corev1.PodDNSConfig{
			Nameservers: []string{"10.96.0.10", "1.1.1.1"}, Searches: []string{"svc.cluster.local", "extra.example"},
			Options: []corev1.PodDNSConfigOption{{Name: "ndots", Value: ptr.To("1")}, {Name: "edns0"}}}), cfg,
			"search app.svc.cluster.local svc.cluster.local cluster.local corp.example lab.example extra.example\n" +
				"nameserver 10.96.0.10\nnameserver 1.1.1.1\noptions edns0 ndots:1\n"},
		{"at most three nameservers", pod(corev1.DNSDefault, false, &corev1.PodDNSConfig{Nameservers: []string{"1.1.1.1", "8.8.8.8"}}), cfg,
			"search corp.example lab.example\nnameserver 192.0.2.53\nnameserver 192.0.2.54\nnameserver 1.1.1.1\noptions edns0 timeout:2\n"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := string(ForPod(tc.pod, tc.cfg).Bytes()); got != tc.want {
				t.Errorf("got\n%s\nwant\n%s", got, tc.want)
			}
		})
	}
}

func TestSearchLimits(t *testing.T) {
	var many []string
	for i := 0; i < 40; i++ {
		many = append(many, strings.Repeat("x", 60)+".example")
	}
	f := ForPod(&corev1.Pod{Spec: corev1.PodSpec{DNSPolicy: corev1.DNSNone, DNSConfig: &corev1.PodDNSConfig{Searches: many}}}, Config{})
	if n := len(strings.Join(f.Searches, " ")); n > maxSearchLength || len(f.Searches) > maxSearchPaths {
		t.Errorf("got %d searches of %d characters, want at most %d and %d", len(f.Searches), n, maxSearchPaths, maxSearchLength)
	}
}

func TestHostname(t *testing.T) {
	long := strings.Repeat("a", 62) + "-b"
	cases := []struct {
		name                 string
		spec                 corev1.PodSpec
		podName              string
		wantHost, wantDomain string
	}{
		{"pod name", corev1.PodSpec{}, "web-1", "web-1", ""},
		{"spec.hostname", corev1.PodSpec{Hostname: "h"}, "web-1", "h", ""},
		{"subdomain", corev1.PodSpec{Hostname: "h", Subdomain: "sub"}, "web-1", "h", "sub.app.svc.cluster.local"},
		{"FQDN", corev1.PodSpec{Hostname: "h", Subdomain: "sub", SetHostnameAsFQDN: ptr.To(true)}, "web-1", "h.sub.app.svc.cluster.local", "sub.app.svc.cluster.local"},
		{"long name cut without trailing dash", corev1.PodSpec{}, long, strings.Repeat("a", 62), ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "app", Name: tc.podName}, Spec: tc.spec}
			host, domain := Hostname(pod, "cluster.local")
			if host != tc.wantHost || domain != tc.wantDomain {
				t.Errorf("got %q, %q, want %q, %q", host, domain, tc.wantHost, tc.wantDomain)
			}
		})
	}
}

func TestHosts(t *testing.T) {
	header := "# Kubernetes-managed hosts file.\n127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n" +
		"fe00::0\tip6-localnet\nfe00::0\tip6-mcastprefix\nfe00::1\tip6-allnodes\nfe00::2\tip6-allrouters\n"
	aliases := []corev1.HostAlias{{IP: "10.1.2.3", Hostnames: []string{"foo.local", "bar.local"}}}
	cases := []struct {
		name string
		spec corev1.PodSpec
		ips  []string
		want string
	}{
		{"plain", corev1.PodSpec{}, []string{"10.244.1.5"}, header + "10.244.1.5\tweb-1\n"},
		{"subdomain, dual-stack", corev1.PodSpec{Hostname: "h", Subdomain: "sub"}, []string{"10.244.1.5", "fd00::5"},
			header + "10.244.1.5\th.sub.app.svc.cluster.local\th\nfd00::5\th.sub.app.svc.cluster.local\th\n"},
		{"aliases", corev1.PodSpec{HostAliases: aliases}, []string{"10.244.1.5"},
			header + "10.244.1.5\tweb-1\n\n# Entries added by HostAliases.\n10.1.2.3\tfoo.local\tbar.local\n"},
		{"host network keeps the node's file", corev1.PodSpec{HostNetwork: true, HostAliases: aliases}, []string{"10.100.0.1"},
			"127.0.0.1 localhost node\n\n# Entries added by HostAliases.\n10.1.2.3\tfoo.local\tbar.local\n"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "app", Name: "web-1"}, Spec: tc.spec}
			if got := string(Hosts(pod, tc.ips, "cluster.local", []byte("127.0.0.1 localhost node"))); got != tc.want {
				t.Errorf("got\n%q\nwant\n%q", got, tc.want)
			}
		})
	}
}
