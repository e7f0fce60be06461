package main

import (
	"fmt"
	"net"
	"slices"
	"testing"

	"portal.dev/portal/apiserver"
	"portal.dev/portal/dns"
	"portal.dev/portal/ingress"
)

func TestReservedNodePorts(t *testing.T) {
	defaults := func() serverOptions {
		return serverOptions{api: apiserver.DefaultOptions(), dns: dns.DefaultOptions(), ingress: ingress.DefaultOptions()}
	}
	all := func(string) bool { return true }
	for _, tc := range []struct {
		name    string
		change  func(*serverOptions)
		enabled func(string) bool
		want    []string
	}{
		{name: "defaults: ingress on every address, API and DNS on loopback", want: []string{
			"80/TCP the Ingress controller of portal server (--http-port)",
			"443/TCP the Ingress controller of portal server (--https-port)",
		}},
		{name: "ingress disabled", enabled: func(c string) bool { return c != "ingress" }},
		{name: "ingress on loopback", change: func(so *serverOptions) { so.ingress.BindAddress = "127.0.0.1" }},
		{name: "API and DNS on the node's address", change: func(so *serverOptions) {
			so.api.BindAddress = net.ParseIP("10.0.0.1")
			so.dns.BindAddresses = append(so.dns.BindAddresses, "10.0.0.1")
			so.ingress.HTTPPort, so.ingress.HTTPSPort = 8080, 8443
		}, want: []string{
			fmt.Sprintf("%d/TCP the API server of portal server (--secure-port)", apiserver.DefaultOptions().SecurePort),
			"8080/TCP the Ingress controller of portal server (--http-port)",
			"8443/TCP the Ingress controller of portal server (--https-port)",
			"53/TCP the DNS of portal server (--dns-port)",
			"53/UDP the DNS of portal server (--dns-port)",
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			so := defaults()
			if tc.change != nil {
				tc.change(&so)
			}
			enabled := tc.enabled
			if enabled == nil {
				enabled = all
			}
			var got []string
			for _, r := range reservedNodePorts(so, enabled) {
				got = append(got, fmt.Sprintf("%d/%s %s", r.Port, r.Protocol, r.Holder))
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("got %q, want %q", got, tc.want)
			}
		})
	}
}
