package ingress

import (
	"strings"
	"testing"
	"time"
)

func TestValidate(t *testing.T) {
	for _, tc := range []struct {
		name    string
		change  func(*Options)
		wantErr string // "" for none; else the flag the error names
	}{
		{name: "defaults", change: func(*Options) {}},
		{name: "port out of range", change: func(o *Options) { o.HTTPPort = 70000 }, wantErr: "--http-port"},
		{name: "same ports", change: func(o *Options) { o.HTTPSPort = 80 }, wantErr: "--http-port and --https-port"},
		{name: "bind address not an IP", change: func(o *Options) { o.BindAddress = "eth0" }, wantErr: "--bind-address"},
		{name: "empty class", change: func(o *Options) { o.IngressClass = "" }, wantErr: "--ingress-class"},
		{name: "certificate without namespace", change: func(o *Options) { o.DefaultSSLCertificate = "tls" }, wantErr: "--default-ssl-certificate"},
		{name: "publish service ok", change: func(o *Options) { o.PublishService = "ingress/portal" }},
		{name: "publish service bad", change: func(o *Options) { o.PublishService = "a/b/c" }, wantErr: "--publish-service"},
		{name: "status addresses", change: func(o *Options) { o.PublishStatusAddress = "192.0.2.1, lb.example.com" }},
		{name: "status address bad", change: func(o *Options) { o.PublishStatusAddress = "192.0.2.0/24" }, wantErr: "--publish-status-address"},
		{name: "negative client body timeout", change: func(o *Options) { o.ClientBodyTimeout = -time.Second }, wantErr: "--client-body-timeout"},
		{name: "negative send timeout", change: func(o *Options) { o.ClientSendTimeout = -time.Second }, wantErr: "--send-timeout"},
		{name: "metrics address without port", change: func(o *Options) { o.MetricsBindAddress = "127.0.0.1" }, wantErr: "--metrics-bind-address"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := DefaultOptions()
			tc.change(&o)
			err := o.Validate()
			switch {
			case tc.wantErr == "" && err != nil:
				t.Errorf("got %v, want no error", err)
			case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
				t.Errorf("got %v, want an error naming %s", err, tc.wantErr)
			}
		})
	}
}

func TestHostname(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"foo.com", "foo.com"},
		{"Foo.COM:8080", "foo.com"},
		{"foo.com.", "foo.com"},
		{"[fd00::1]:80", "fd00::1"},
		{"[fd00::1]", "fd00::1"},
		{"192.0.2.1:443", "192.0.2.1"},
		{"", ""},
	} {
		if got := hostname(tc.in); got != tc.want {
			t.Errorf("hostname(%q): got %q, want %q", tc.in, got, tc.want)
		}
	}
}
