package dns

import (
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"
)

func TestValidate(t *testing.T) {
	for _, tc := range []struct {
		name string
		mod  func(*Options)
		want string // substring of the error; empty: valid
	}{
		{"defaults", func(*Options) {}, ""},
		{"zero value", func(o *Options) { *o = Options{} }, ""},
		{"IPv6 and IPv4", func(o *Options) { o.BindAddresses = []string{"127.0.0.1", "::1"} }, ""},
		{"bad bind address", func(o *Options) { o.BindAddresses = []string{"localhost"} }, "--dns-bind-address"},
		{"bad port", func(o *Options) { o.Port = 70000 }, "--dns-port"},
		{"bad domain", func(o *Options) { o.ClusterDomain = "a..b" }, "--cluster-domain"},
		{"bad upstream", func(o *Options) { o.Upstream = []string{"dns.example"} }, "--upstream"},
		{"none with servers", func(o *Options) { o.Upstream = []string{"none", "192.0.2.1"} }, "--upstream"},
		{"upstream forms", func(o *Options) {
			o.Upstream = []string{"192.0.2.1", "192.0.2.2:5353", "[2001:db8::1]:53", "/etc/resolv.conf"}
		}, ""},
		{"fractional TTL", func(o *Options) { o.TTL = 1500 * time.Millisecond }, "--dns-ttl"},
		{"bad pods", func(o *Options) { o.Pods = "all" }, "--pods"},
		{"bad health address", func(o *Options) { o.HealthBindAddress = "8080" }, "--health-bind-address"},
		{"bad metrics address", func(o *Options) { o.MetricsBindAddress = "x" }, "--metrics-bind-address"},
		{"bad ready address", func(o *Options) { o.ReadyBindAddress = "8181" }, "--ready-bind-address"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := DefaultOptions()
			tc.mod(&o)
			err := o.Validate()
			switch {
			case tc.want == "" && err != nil:
				t.Errorf("got %v, want valid", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Errorf("got %v, want an error naming %s", err, tc.want)
			}
		})
	}
}

func TestResolveUpstreams(t *testing.T) {
	conf := filepath.Join(t.TempDir(), "resolv.conf")
	if err := os.WriteFile(conf, []byte("nameserver 192.0.2.53\nnameserver 2001:db8::53\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name     string
		upstream []string
		want     []string
	}{
		{"file", []string{conf}, []string{"192.0.2.53:53", "[2001:db8::53]:53"}},
		{"addresses", []string{"192.0.2.1", "192.0.2.2:5353"}, []string{"192.0.2.1:53", "192.0.2.2:5353"}},
		{"none", []string{"none"}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Options{Upstream: tc.upstream}.resolveUpstreams(53)
			if err != nil || !slices.Equal(got, tc.want) {
				t.Errorf("got %v, %v; want %v", got, err, tc.want)
			}
		})
	}
}

func TestNeverForwardsToItself(t *testing.T) {
	s, err := New(nil, Options{Upstream: []string{"127.0.0.1:5399", "192.0.2.1"}, Port: 5399})
	if err != nil {
		t.Fatal(err)
	}
	s.port = 5399
	if err := s.setupForwarder(); err != nil {
		t.Fatal(err)
	}
	if want := []string{"192.0.2.1:53"}; !slices.Equal(s.upstreams, want) {
		t.Errorf("upstreams: got %v, want %v", s.upstreams, want)
	}
}

func TestServeIPv6(t *testing.T) {
	if l, err := net.ListenPacket("udp", "[::1]:0"); err != nil {
		t.Skip("no IPv6 loopback:", err)
	} else {
		l.Close()
	}
	s, _ := startTestServer(t, Options{BindAddresses: []string{"127.0.0.1", "::1"}, Upstream: []string{"none"}}, fillCluster)
	for _, network := range []string{"udp", "tcp"} {
		m := new(dns.Msg)
		m.SetQuestion("web.default.svc.cluster.local.", dns.TypeA)
		resp := exchange(t, network, net.JoinHostPort("::1", strconv.Itoa(s.port)), m)
		if len(resp.Answer) != 1 {
			t.Errorf("%s over IPv6: got %v, want one answer", network, resp)
		}
	}
}
