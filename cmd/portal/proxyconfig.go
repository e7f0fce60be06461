package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strings"

	"github.com/spf13/pflag"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	componentconfig "k8s.io/component-base/config/v1alpha1"
	logsapi "k8s.io/component-base/logs/api/v1"
	sigsjson "sigs.k8s.io/json"
	"sigs.k8s.io/yaml"

	"portal.dev/portal/proxy"
)

// The type of the file `portal proxy --config` reads.
const (
	kubeProxyAPIVersion = "kubeproxy.config.k8s.io/v1alpha1"
	kubeProxyKind       = "KubeProxyConfiguration"
)

// kubeProxyConfiguration has the fields of kube-proxy's
// KubeProxyConfiguration (k8s.io/kube-proxy/config/v1alpha1) under the
// same JSON names, so that a field no version of kube-proxy has is refused
// as unknown, and one kube-proxy has but Portal does not is refused as
// unsupported. Declared here rather than imported: that module would bring
// kube-proxy's scheme and feature gates for a list of names.
type kubeProxyConfiguration struct {
	metav1.TypeMeta `json:",inline"`

	FeatureGates     map[string]bool                               `json:"featureGates,omitempty"`
	ClientConnection componentconfig.ClientConnectionConfiguration `json:"clientConnection"`
	Logging          logsapi.LoggingConfiguration                  `json:"logging,omitempty"`

	HostnameOverride            string `json:"hostnameOverride"`
	BindAddress                 string `json:"bindAddress"`
	HealthzBindAddress          string `json:"healthzBindAddress"`
	MetricsBindAddress          string `json:"metricsBindAddress"`
	BindAddressHardFail         bool   `json:"bindAddressHardFail"`
	EnableProfiling             bool   `json:"enableProfiling"`
	ShowHiddenMetricsForVersion string `json:"showHiddenMetricsForVersion"`

	Mode      string             `json:"mode"`
	IPTables  kubeProxyIPTables  `json:"iptables"`
	IPVS      kubeProxyIPVS      `json:"ipvs"`
	NFTables  kubeProxyNFTables  `json:"nftables"`
	Winkernel kubeProxyWinkernel `json:"winkernel"`

	DetectLocalMode   string               `json:"detectLocalMode"`
	DetectLocal       kubeProxyDetectLocal `json:"detectLocal"`
	ClusterCIDR       string               `json:"clusterCIDR"`
	NodePortAddresses []string             `json:"nodePortAddresses"`

	OOMScoreAdj         *int32             `json:"oomScoreAdj"`
	Conntrack           kubeProxyConntrack `json:"conntrack"`
	ConfigSyncPeriod    metav1.Duration    `json:"configSyncPeriod"`
	PortRange           string             `json:"portRange"`
	WindowsRunAsService bool               `json:"windowsRunAsService,omitempty"`
}

type kubeProxyIPTables struct {
	MasqueradeBit      *int32          `json:"masqueradeBit"`
	MasqueradeAll      bool            `json:"masqueradeAll"`
	LocalhostNodePorts *bool           `json:"localhostNodePorts"`
	SNATNodeInternalIP *bool           `json:"snatNodeInternalIP"`
	SyncPeriod         metav1.Duration `json:"syncPeriod"`
	MinSyncPeriod      metav1.Duration `json:"minSyncPeriod"`
}

type kubeProxyNFTables struct {
	MasqueradeBit *int32          `json:"masqueradeBit"`
	MasqueradeAll bool            `json:"masqueradeAll"`
	SyncPeriod    metav1.Duration `json:"syncPeriod"`
	MinSyncPeriod metav1.Duration `json:"minSyncPeriod"`
}

type kubeProxyIPVS struct {
	SyncPeriod    metav1.Duration `json:"syncPeriod"`
	MinSyncPeriod metav1.Duration `json:"minSyncPeriod"`
	Scheduler     string          `json:"scheduler"`
	ExcludeCIDRs  []string        `json:"excludeCIDRs"`
	StrictARP     bool            `json:"strictARP"`
	TCPTimeout    metav1.Duration `json:"tcpTimeout"`
	TCPFinTimeout metav1.Duration `json:"tcpFinTimeout"`
	UDPTimeout    metav1.Duration `json:"udpTimeout"`
}

type kubeProxyWinkernel struct {
	NetworkName           string `json:"networkName"`
	SourceVip             string `json:"sourceVip"`
	EnableDSR             bool   `json:"enableDSR"`
	RootHnsEndpointName   string `json:"rootHnsEndpointName"`
	ForwardHealthCheckVip bool   `json:"forwardHealthCheckVip"`
}

type kubeProxyDetectLocal struct {
	BridgeInterface     string `json:"bridgeInterface"`
	InterfaceNamePrefix string `json:"interfaceNamePrefix"`
}

type kubeProxyConntrack struct {
	MaxPerCore            *int32           `json:"maxPerCore"`
	Min                   *int32           `json:"min"`
	TCPEstablishedTimeout *metav1.Duration `json:"tcpEstablishedTimeout"`
	TCPCloseWaitTimeout   *metav1.Duration `json:"tcpCloseWaitTimeout"`
	TCPBeLiberal          bool             `json:"tcpBeLiberal"`
	UDPTimeout            metav1.Duration  `json:"udpTimeout"`
	UDPStreamTimeout      metav1.Duration  `json:"udpStreamTimeout"`
}

// kubeProxySettings reads a KubeProxyConfiguration into the proxy's
// flags. As in kube-proxy, an empty or zero field means the default, the
// sync periods and masqueradeAll come from the section of the mode that
// runs (nftables, or iptables for the iptables and userspace modes; the
// other section is ignored), and a healthz or metrics address without a
// port takes the default port. Unlike kube-proxy, which ignores most
// flags once it has --config, flags on the command line override the
// file, as kubelet's do; Portal's own flags (--scheduler, --drain-timeout)
// have no field and stay flags.
func kubeProxySettings(data []byte, flags *pflag.FlagSet) ([]flagSetting, error) {
	c, err := decodeKubeProxyConfiguration(data)
	if err != nil {
		return nil, err
	}
	var errs []error
	refuse := func(field string, why string) {
		errs = append(errs, fmt.Errorf("field %q is not supported by Portal's proxy: %s", field, why))
	}
	checkUnsupported(c, refuse)
	var out []flagSetting
	set := func(field, flag, value string) {
		if value != "" {
			out = append(out, flagSetting{key: fmt.Sprintf("field %q", field), flag: flag, value: value})
		}
	}
	switch c.Mode {
	case "", proxy.ModeNFTables, proxy.ModeIPTables, proxy.ModeUserspace:
	default:
		errs = append(errs, fmt.Errorf("field \"mode\": %q is not a mode of Portal's proxy (want %s, %s or %s)", c.Mode, proxy.ModeNFTables, proxy.ModeIPTables, proxy.ModeUserspace))
	}
	// The mode that will run picks the section to read.
	mode := c.Mode
	if f := flags.Lookup("proxy-mode"); f.Changed || mode == "" {
		mode = f.Value.String()
	}
	set("mode", "proxy-mode", c.Mode)
	set("hostnameOverride", "hostname-override", strings.TrimSpace(c.HostnameOverride))
	set("clusterCIDR", "cluster-cidr", c.ClusterCIDR)
	if len(c.NodePortAddresses) > 0 {
		set("nodePortAddresses", "nodeport-addresses", joinCSV(c.NodePortAddresses))
	}
	set("clientConnection.kubeconfig", "kubeconfig", c.ClientConnection.Kubeconfig)

	healthz, metrics := "0.0.0.0", "127.0.0.1"
	switch c.BindAddress {
	case "", "0.0.0.0":
	case "::":
		healthz, metrics = "::", "::1"
	default:
		refuse("bindAddress", "it has no setting for the node's primary IP; only 0.0.0.0 or :: (the family of the default healthz and metrics addresses) are accepted")
	}
	set("healthzBindAddress", "healthz-bind-address", withPort(c.HealthzBindAddress, healthz, "10256"))
	set("metricsBindAddress", "metrics-bind-address", withPort(c.MetricsBindAddress, metrics, "10249"))

	section, name := c.IPTables.nftables(), "iptables"
	if mode == proxy.ModeNFTables {
		section, name = c.NFTables, "nftables"
	}
	if section.MasqueradeBit != nil && *section.MasqueradeBit != 14 {
		refuse(name+".masqueradeBit", "it always marks packets to masquerade with bit 14 (0x4000), kube-proxy's default")
	}
	if section.MasqueradeAll {
		set(name+".masqueradeAll", "masquerade-all", "true")
	}
	set(name+".syncPeriod", "sync-period", duration(section.SyncPeriod))
	set(name+".minSyncPeriod", "min-sync-period", duration(section.MinSyncPeriod))
	if name == "iptables" {
		if b := c.IPTables.LocalhostNodePorts; b != nil && *b {
			refuse("iptables.localhostNodePorts", "it never accepts NodePort traffic on localhost, as kube-proxy's nftables mode")
		}
		if b := c.IPTables.SNATNodeInternalIP; b != nil && *b {
			refuse("iptables.snatNodeInternalIP", "it masquerades to the outgoing interface's address")
		}
	}
	out = append(out, loggingSettings(c.Logging, flags, refuse)...)
	return out, errors.Join(errs...)
}

// nftables is the part of the iptables section the nftables one has too.
func (t kubeProxyIPTables) nftables() kubeProxyNFTables {
	return kubeProxyNFTables{MasqueradeBit: t.MasqueradeBit, MasqueradeAll: t.MasqueradeAll, SyncPeriod: t.SyncPeriod, MinSyncPeriod: t.MinSyncPeriod}
}

// decodeKubeProxyConfiguration decodes data strictly: the type must be
// kube-proxy's v1alpha1, and a field it does not have, or one given twice,
// is refused by its path.
func decodeKubeProxyConfiguration(data []byte) (kubeProxyConfiguration, error) {
	var c kubeProxyConfiguration
	j, err := yaml.YAMLToJSONStrict(data)
	if err != nil {
		return c, err
	}
	var tm metav1.TypeMeta
	if err := json.Unmarshal(j, &tm); err != nil {
		return c, err
	}
	if tm.APIVersion != kubeProxyAPIVersion || tm.Kind != kubeProxyKind {
		return c, fmt.Errorf("apiVersion %q, kind %q: want apiVersion %s, kind %s", tm.APIVersion, tm.Kind, kubeProxyAPIVersion, kubeProxyKind)
	}
	strict, err := sigsjson.UnmarshalStrict(j, &c)
	if err != nil {
		return c, err
	}
	return c, errors.Join(strict...)
}

// checkUnsupported refuses the fields Portal's proxy has no setting for,
// unless they hold their zero value (which kube-proxy reads as its
// default, and configurations written by kubeadm carry) or the value that
// Portal's proxy behaves as.
func checkUnsupported(c kubeProxyConfiguration, refuse func(field, why string)) {
	cc := c.ClientConnection
	for _, u := range []struct {
		field string
		set   bool
		why   string
	}{
		{"featureGates", len(c.FeatureGates) > 0, "it has no feature gates"},
		{"clientConnection.acceptContentTypes", cc.AcceptContentTypes != "" && cc.AcceptContentTypes != "application/vnd.kubernetes.protobuf,application/json", "it always accepts protobuf, then JSON"},
		{"clientConnection.contentType", cc.ContentType != "" && cc.ContentType != "application/vnd.kubernetes.protobuf", "it always sends protobuf"},
		{"clientConnection.qps", cc.QPS != 0 && cc.QPS != 5, "it keeps client-go's default of 5"},
		{"clientConnection.burst", cc.Burst != 0 && cc.Burst != 10, "it keeps client-go's default of 10"},
		{"enableProfiling", c.EnableProfiling, "it serves no /debug/pprof"},
		{"showHiddenMetricsForVersion", c.ShowHiddenMetricsForVersion != "", "it hides no metrics"},
		{"ipvs", !isZero(c.IPVS), "Portal has no ipvs mode"},
		{"winkernel", c.Winkernel != kubeProxyWinkernel{}, "Portal's proxy runs on Linux (and in userspace mode elsewhere), not on Windows' HNS"},
		{"windowsRunAsService", c.WindowsRunAsService, "Portal's proxy runs on Linux (and in userspace mode elsewhere), not on Windows' HNS"},
		{"detectLocalMode", c.DetectLocalMode != "" && c.DetectLocalMode != "ClusterCIDR", "it tells local traffic by clusterCIDR only"},
		{"detectLocal", c.DetectLocal != kubeProxyDetectLocal{}, "it tells local traffic by clusterCIDR only"},
		{"oomScoreAdj", c.OOMScoreAdj != nil, "it leaves its OOM score to the service manager (OOMScoreAdjust= in a systemd unit)"},
		{"conntrack", !isZero(c.Conntrack), "it leaves the kernel's conntrack limits and timeouts as they are"},
		{"configSyncPeriod", c.ConfigSyncPeriod.Duration != 0, "its informers never resync"},
		{"portRange", c.PortRange != "", "kube-proxy ignores it too"},
	} {
		if u.set {
			refuse(u.field, u.why)
		}
	}
}

// isZero says whether an unsupported section holds only zeros, a pointer
// to zero counting as zero (conntrack.maxPerCore: 0 leaves the limit as
// it is).
func isZero(section any) bool {
	switch s := section.(type) {
	case kubeProxyIPVS:
		return s.SyncPeriod.Duration == 0 && s.MinSyncPeriod.Duration == 0 && s.Scheduler == "" && len(s.ExcludeCIDRs) == 0 &&
			!s.StrictARP && s.TCPTimeout.Duration == 0 && s.TCPFinTimeout.Duration == 0 && s.UDPTimeout.Duration == 0
	case kubeProxyConntrack:
		zeroInt := func(p *int32) bool { return p == nil || *p == 0 }
		zeroDur := func(p *metav1.Duration) bool { return p == nil || p.Duration == 0 }
		return zeroInt(s.MaxPerCore) && zeroInt(s.Min) && zeroDur(s.TCPEstablishedTimeout) && zeroDur(s.TCPCloseWaitTimeout) &&
			!s.TCPBeLiberal && s.UDPTimeout.Duration == 0 && s.UDPStreamTimeout.Duration == 0
	}
	panic(fmt.Sprintf("isZero: %T", section))
}

// loggingSettings maps the logging section to the logging flags the
// command has (component-base's names); a field set without its flag is
// refused.
func loggingSettings(l logsapi.LoggingConfiguration, flags *pflag.FlagSet, refuse func(field, why string)) []flagSetting {
	var vmodule []string
	for _, m := range l.VModule {
		vmodule = append(vmodule, fmt.Sprintf("%s=%d", m.FilePattern, m.Verbosity))
	}
	var out []flagSetting
	for _, f := range []struct{ field, flag, value string }{
		{"format", "logging-format", nonZero(l.Format, logsapi.DefaultLogFormat)},
		{"flushFrequency", "log-flush-frequency", duration(l.FlushFrequency.Duration)},
		{"verbosity", "v", nonZero(fmt.Sprint(l.Verbosity), "0")},
		{"vmodule", "vmodule", strings.Join(vmodule, ",")},
		{"options.text.splitStream", "log-text-split-stream", nonZero(fmt.Sprint(l.Options.Text.SplitStream), "false")},
		{"options.text.infoBufferSize", "log-text-info-buffer-size", nonZero(l.Options.Text.InfoBufferSize.String(), "0")},
		{"options.json.splitStream", "log-json-split-stream", nonZero(fmt.Sprint(l.Options.JSON.SplitStream), "false")},
		{"options.json.infoBufferSize", "log-json-info-buffer-size", nonZero(l.Options.JSON.InfoBufferSize.String(), "0")},
	} {
		switch {
		case f.value == "":
		case flags.Lookup(f.flag) == nil:
			refuse("logging."+f.field, fmt.Sprintf("this command has no --%s flag", f.flag))
		default:
			out = append(out, flagSetting{key: fmt.Sprintf("field %q", "logging."+f.field), flag: f.flag, value: f.value})
		}
	}
	return out
}

// nonZero is s, or "" when s is the zero value's text.
func nonZero(s, zero string) string {
	if s == zero {
		return ""
	}
	return s
}

// duration is d's flag form, or "" for zero (the default).
func duration(d metav1.Duration) string {
	if d.Duration == 0 {
		return ""
	}
	return d.Duration.String()
}

// withPort gives addr the port when it is an address alone, as kube-proxy
// does; an empty addr is "" (the flag's default) unless host is not the
// default family's.
func withPort(addr, host, port string) string {
	if addr == "" {
		if host == "0.0.0.0" || host == "127.0.0.1" {
			return ""
		}
		addr = host
	}
	if _, err := netip.ParseAddr(addr); err == nil {
		return net.JoinHostPort(addr, port)
	}
	return addr
}
