package main

import (
	"strings"
	"testing"

	"github.com/spf13/pflag"
)

const kubeProxyHeader = "apiVersion: kubeproxy.config.k8s.io/v1alpha1\nkind: KubeProxyConfiguration\n"

// `portal proxy --config` reads kube-proxy's KubeProxyConfiguration into
// the proxy's flags; flags on the command line override it.
func TestProxyConfigFile(t *testing.T) {
	tests := []struct {
		name string
		file string
		args []string
		want map[string]string // flag: value
	}{
		{
			name: "fields set their flags",
			file: kubeProxyHeader + `mode: iptables
hostnameOverride: node-1
clusterCIDR: 10.244.0.0/16,fd00:10:244::/56
nodePortAddresses: [10.0.0.0/8, 192.168.0.0/16]
healthzBindAddress: 127.0.0.1
metricsBindAddress: 0.0.0.0:9100
clientConnection:
  kubeconfig: /etc/portal/proxy.kubeconfig
iptables:
  masqueradeAll: true
  syncPeriod: 20s
  minSyncPeriod: 2s
`,
			want: map[string]string{
				"proxy-mode": "iptables", "hostname-override": "node-1", "cluster-cidr": "10.244.0.0/16,fd00:10:244::/56",
				"nodeport-addresses": "[10.0.0.0/8,192.168.0.0/16]", "healthz-bind-address": "127.0.0.1:10256",
				"metrics-bind-address": "0.0.0.0:9100", "kubeconfig": "/etc/portal/proxy.kubeconfig",
				"masquerade-all": "true", "sync-period": "20s", "min-sync-period": "2s",
			},
		},
		{
			name: "nftables mode reads the nftables section",
			file: kubeProxyHeader + "mode: nftables\nnftables: {syncPeriod: 40s, masqueradeAll: true}\niptables: {syncPeriod: 50s}\n",
			want: map[string]string{"proxy-mode": "nftables", "sync-period": "40s", "masquerade-all": "true"},
		},
		{
			name: "no mode is the flag's default, nftables",
			file: kubeProxyHeader + "nftables: {syncPeriod: 40s}\n",
			want: map[string]string{"proxy-mode": "nftables", "sync-period": "40s"},
		},
		{
			name: "command line overrides the file and picks the section",
			file: kubeProxyHeader + "mode: nftables\nclusterCIDR: 10.244.0.0/16\nnftables: {syncPeriod: 40s}\niptables: {syncPeriod: 50s}\n",
			args: []string{"--proxy-mode", "iptables", "--cluster-cidr", "10.0.0.0/16"},
			want: map[string]string{"proxy-mode": "iptables", "cluster-cidr": "10.0.0.0/16", "sync-period": "50s"},
		},
		{
			name: "zeros mean the defaults, as kubeadm writes them",
			file: kubeProxyHeader + `bindAddress: 0.0.0.0
bindAddressHardFail: false
clientConnection: {acceptContentTypes: "", burst: 0, contentType: "", kubeconfig: /var/lib/kube-proxy/kubeconfig.conf, qps: 0}
clusterCIDR: 10.244.0.0/16
configSyncPeriod: 0s
conntrack: {maxPerCore: null, min: null, tcpBeLiberal: false, tcpCloseWaitTimeout: null, tcpEstablishedTimeout: null, udpStreamTimeout: 0s, udpTimeout: 0s}
detectLocal: {bridgeInterface: "", interfaceNamePrefix: ""}
detectLocalMode: ""
enableProfiling: false
healthzBindAddress: ""
hostnameOverride: ""
iptables: {localhostNodePorts: null, masqueradeAll: false, masqueradeBit: null, minSyncPeriod: 0s, syncPeriod: 0s}
ipvs: {excludeCIDRs: null, minSyncPeriod: 0s, scheduler: "", strictARP: false, syncPeriod: 0s, tcpFinTimeout: 0s, tcpTimeout: 0s, udpTimeout: 0s}
logging: {flushFrequency: 0, options: {json: {infoBufferSize: "0"}, text: {infoBufferSize: "0"}}, verbosity: 0}
metricsBindAddress: ""
mode: ""
nftables: {masqueradeAll: false, masqueradeBit: null, minSyncPeriod: 0s, syncPeriod: 0s}
nodePortAddresses: null
oomScoreAdj: null
portRange: ""
showHiddenMetricsForVersion: ""
winkernel: {enableDSR: false, forwardHealthCheckVip: false, networkName: "", rootHnsEndpointName: "", sourceVip: ""}
`,
			want: map[string]string{"proxy-mode": "nftables", "cluster-cidr": "10.244.0.0/16", "kubeconfig": "/var/lib/kube-proxy/kubeconfig.conf",
				"healthz-bind-address": "0.0.0.0:10256", "metrics-bind-address": "127.0.0.1:10249", "sync-period": "30s"},
		},
		{
			name: "values Portal behaves as are accepted",
			file: kubeProxyHeader + "detectLocalMode: ClusterCIDR\nnftables: {masqueradeBit: 14}\nconntrack: {maxPerCore: 0}\nclientConnection: {qps: 5, burst: 10}\nlogging: {format: text}\n",
			want: map[string]string{"proxy-mode": "nftables"},
		},
		{
			name: "bindAddress :: gives IPv6 default addresses",
			file: kubeProxyHeader + "bindAddress: \"::\"\n",
			want: map[string]string{"healthz-bind-address": "[::]:10256", "metrics-bind-address": "[::1]:10249"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cmd, err := parseWithConfig(t, append([]string{"proxy", "--config", writeFile(t, tt.file)}, tt.args...)...)
			if err != nil {
				t.Fatal(err)
			}
			for flag, want := range tt.want {
				if got := cmd.Flags().Lookup(flag).Value.String(); got != want {
					t.Errorf("--%s = %q, want %q", flag, got, want)
				}
			}
		})
	}
}

// A field kube-proxy does not have, one Portal does not support, and a
// file of another type are refused, naming what is wrong.
func TestProxyConfigFileRefused(t *testing.T) {
	tests := []struct {
		name string
		file string
		want []string
	}{
		{"unknown field", kubeProxyHeader + "mode: nftables\nfoo: 1\n", []string{`unknown field "foo"`}},
		{"unknown nested field", kubeProxyHeader + "conntrack:\n  maxPerCor: 1\n", []string{`unknown field "conntrack.maxPerCor"`}},
		{"field twice", kubeProxyHeader + "mode: nftables\nmode: iptables\n", []string{`"mode" already set`}},
		{"wrong type", kubeProxyHeader + "nodePortAddresses: 10.0.0.0/8\n", []string{"nodePortAddresses"}},
		{"unsupported mode", kubeProxyHeader + "mode: ipvs\n", []string{`field "mode": "ipvs" is not a mode of Portal's proxy`}},
		{"unsupported fields, all named", kubeProxyHeader + "ipvs: {scheduler: rr}\nconntrack: {maxPerCore: 32768}\nfeatureGates: {Foo: true}\noomScoreAdj: -999\n",
			[]string{`field "ipvs" is not supported`, `field "conntrack" is not supported`, `field "featureGates" is not supported`, `field "oomScoreAdj" is not supported`}},
		{"masquerade bit", kubeProxyHeader + "nftables: {masqueradeBit: 12}\n", []string{`field "nftables.masqueradeBit" is not supported`}},
		{"bind address", kubeProxyHeader + "bindAddress: 10.0.0.1\n", []string{`field "bindAddress" is not supported`}},
		{"localhost NodePorts", kubeProxyHeader + "mode: iptables\niptables: {localhostNodePorts: true}\n", []string{`field "iptables.localhostNodePorts" is not supported`}},
		{"detect-local mode", kubeProxyHeader + "detectLocalMode: NodeCIDR\n", []string{`field "detectLocalMode" is not supported`}},
		{"bad duration", kubeProxyHeader + "nftables: {syncPeriod: soon}\n", []string{"soon"}},
		{"bad apiVersion", "apiVersion: kubeproxy.config.k8s.io/v1beta1\nkind: KubeProxyConfiguration\n", []string{`apiVersion "kubeproxy.config.k8s.io/v1beta1"`, "want apiVersion kubeproxy.config.k8s.io/v1alpha1"}},
		{"bad kind", "apiVersion: kubeproxy.config.k8s.io/v1alpha1\nkind: KubeletConfiguration\n", []string{`kind "KubeletConfiguration"`, "kind KubeProxyConfiguration"}},
		{"no type", "mode: nftables\n", []string{`apiVersion "", kind ""`}},
		{"flag names are not fields", kubeProxyHeader + "proxy-mode: nftables\n", []string{`unknown field "proxy-mode"`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := writeFile(t, tt.file)
			_, err := parseWithConfig(t, "proxy", "--config", path)
			if err == nil {
				t.Fatalf("no error; want one containing %q", tt.want)
			}
			for _, want := range append(tt.want, path) {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("got error %q, want one containing %q", err, want)
				}
			}
		})
	}
}

// The logging section sets the logging flags the command has (cli.Run
// adds -v and --vmodule to every command) and is refused without them.
func TestProxyConfigLogging(t *testing.T) {
	file := []byte(kubeProxyHeader + "logging:\n  verbosity: 4\n  vmodule: [{filePattern: proxy*, verbosity: 5}]\n")
	fs := pflag.NewFlagSet("proxy", pflag.ContinueOnError)
	fs.String("proxy-mode", "nftables", "")
	if _, err := kubeProxySettings(file, fs); err == nil || !strings.Contains(err.Error(), `field "logging.verbosity" is not supported by Portal's proxy: this command has no --v flag`) {
		t.Errorf("without -v: got error %v", err)
	}
	fs.Int("v", 0, "")
	fs.String("vmodule", "", "")
	settings, err := kubeProxySettings(file, fs)
	if err != nil {
		t.Fatal(err)
	}
	if err := applySettings(fs, settings); err != nil {
		t.Fatal(err)
	}
	if v, vmodule := fs.Lookup("v").Value.String(), fs.Lookup("vmodule").Value.String(); v != "4" || vmodule != "proxy*=5" {
		t.Errorf("-v %s --vmodule %s, want 4 and proxy*=5", v, vmodule)
	}
}

// The proxy refuses a bad file before it starts anything.
func TestProxyConfigFileRefusedBeforeRun(t *testing.T) {
	root := newRootCommand()
	root.SetArgs([]string{"proxy", "--config", writeFile(t, kubeProxyHeader+"foo: 1\n")})
	root.SetOut(new(strings.Builder))
	root.SetErr(new(strings.Builder))
	if err := root.Execute(); err == nil || !strings.Contains(err.Error(), `unknown field "foo"`) {
		t.Errorf("got error %v, want unknown field \"foo\"", err)
	}
}
