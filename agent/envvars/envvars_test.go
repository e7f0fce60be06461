package envvars

import (
	"maps"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/ptr"
)

func svc(ns, name, ip string, ports ...corev1.ServicePort) *corev1.Service {
	return &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: corev1.ServiceSpec{ClusterIP: ip, Ports: ports}}
}

func port(name string, proto corev1.Protocol, n int32) corev1.ServicePort {
	return corev1.ServicePort{Name: name, Protocol: proto, Port: n}
}

// TestFromServices pins the variable set of kubelet's envvars.FromServices
// (pkg/kubelet/envvars) for the same Services.
func TestFromServices(t *testing.T) {
	cases := []struct {
		name     string
		services []*corev1.Service
		want     []Var
	}{
		{"one unnamed port", []*corev1.Service{svc("ns", "my-service", "10.96.0.20", port("", corev1.ProtocolTCP, 80))}, []Var{
			{"MY_SERVICE_SERVICE_HOST", "10.96.0.20"},
			{"MY_SERVICE_SERVICE_PORT", "80"},
			{"MY_SERVICE_PORT", "tcp://10.96.0.20:80"},
			{"MY_SERVICE_PORT_80_TCP", "tcp://10.96.0.20:80"},
			{"MY_SERVICE_PORT_80_TCP_PROTO", "tcp"},
			{"MY_SERVICE_PORT_80_TCP_PORT", "80"},
			{"MY_SERVICE_PORT_80_TCP_ADDR", "10.96.0.20"},
		}},
		{"named ports, default protocol, UDP", []*corev1.Service{svc("ns", "dns", "10.96.0.10", port("dns-tcp", "", 53), port("dns", corev1.ProtocolUDP, 53))}, []Var{
			{"DNS_SERVICE_HOST", "10.96.0.10"},
			{"DNS_SERVICE_PORT", "53"},
			{"DNS_SERVICE_PORT_DNS_TCP", "53"},
			{"DNS_SERVICE_PORT_DNS", "53"},
			{"DNS_PORT", "tcp://10.96.0.10:53"},
			{"DNS_PORT_53_TCP", "tcp://10.96.0.10:53"},
			{"DNS_PORT_53_TCP_PROTO", "tcp"},
			{"DNS_PORT_53_TCP_PORT", "53"},
			{"DNS_PORT_53_TCP_ADDR", "10.96.0.10"},
			{"DNS_PORT_53_UDP", "udp://10.96.0.10:53"},
			{"DNS_PORT_53_UDP_PROTO", "udp"},
			{"DNS_PORT_53_UDP_PORT", "53"},
			{"DNS_PORT_53_UDP_ADDR", "10.96.0.10"},
		}},
		{"IPv6 address in brackets", []*corev1.Service{svc("ns", "v6", "fd00::a", port("", corev1.ProtocolSCTP, 9))}, []Var{
			{"V6_SERVICE_HOST", "fd00::a"},
			{"V6_SERVICE_PORT", "9"},
			{"V6_PORT", "sctp://[fd00::a]:9"},
			{"V6_PORT_9_SCTP", "sctp://[fd00::a]:9"},
			{"V6_PORT_9_SCTP_PROTO", "sctp"},
			{"V6_PORT_9_SCTP_PORT", "9"},
			{"V6_PORT_9_SCTP_ADDR", "fd00::a"},
		}},
		{"headless and ExternalName give none", []*corev1.Service{
			svc("ns", "headless", "None", port("", corev1.ProtocolTCP, 80)),
			svc("ns", "external", "", port("", corev1.ProtocolTCP, 80)),
		}, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := FromServices(tc.services)
			if !slices.Equal(got, tc.want) {
				t.Errorf("got %v, want %v", got, tc.want)
			}
		})
	}
}

func TestServiceMap(t *testing.T) {
	kubernetes := svc("default", "kubernetes", "10.96.0.1", port("https", corev1.ProtocolTCP, 443))
	web := svc("app", "web", "10.96.0.30", port("", corev1.ProtocolTCP, 80))
	other := svc("other", "db", "10.96.0.40", port("", corev1.ProtocolTCP, 5432))
	shadow := svc("app", "kubernetes", "10.96.0.50", port("", corev1.ProtocolTCP, 8443))
	defaultWeb := svc("default", "web2", "10.96.0.60", port("", corev1.ProtocolTCP, 80))
	all := []*corev1.Service{kubernetes, web, other, defaultWeb}
	cases := []struct {
		name     string
		services []*corev1.Service
		ns       string
		links    bool
		want     []string // SERVICE_HOST variables
		hosts    map[string]string
	}{
		{"links on: own namespace and kubernetes", all, "app", true,
			[]string{"KUBERNETES_SERVICE_HOST", "WEB_SERVICE_HOST"}, nil},
		{"links off: only kubernetes", all, "app", false,
			[]string{"KUBERNETES_SERVICE_HOST"}, nil},
		{"default namespace, links off: only kubernetes", all, "default", false,
			[]string{"KUBERNETES_SERVICE_HOST"}, nil},
		{"default namespace, links on", all, "default", true,
			[]string{"KUBERNETES_SERVICE_HOST", "WEB2_SERVICE_HOST"}, nil},
		{"a kubernetes Service in the pod's namespace wins (listed after)", []*corev1.Service{kubernetes, shadow}, "app", true,
			[]string{"KUBERNETES_SERVICE_HOST"}, map[string]string{"KUBERNETES_SERVICE_HOST": "10.96.0.50", "KUBERNETES_SERVICE_PORT": "8443"}},
		{"a kubernetes Service in the pod's namespace wins (listed before)", []*corev1.Service{shadow, kubernetes}, "app", true,
			[]string{"KUBERNETES_SERVICE_HOST"}, map[string]string{"KUBERNETES_SERVICE_HOST": "10.96.0.50"}},
		{"links off ignores the shadow", []*corev1.Service{shadow, kubernetes}, "app", false,
			[]string{"KUBERNETES_SERVICE_HOST"}, map[string]string{"KUBERNETES_SERVICE_HOST": "10.96.0.1", "KUBERNETES_SERVICE_PORT_HTTPS": "443"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			m := ServiceMap(tc.services, tc.ns, tc.links)
			var got []string
			for k := range m {
				if len(k) > 13 && k[len(k)-13:] == "_SERVICE_HOST" {
					got = append(got, k)
				}
			}
			slices.Sort(got)
			if !slices.Equal(got, tc.want) {
				t.Errorf("got %v, want %v", got, tc.want)
			}
			for k, v := range tc.hosts {
				if m[k] != v {
					t.Errorf("%s: got %q, want %q", k, m[k], v)
				}
			}
		})
	}
}

func TestExpand(t *testing.T) {
	m := lookup(map[string]string{"A": "a", "EMPTY": ""}, map[string]string{"A": "shadowed", "S": "s"})
	cases := []struct{ in, want string }{
		{"$(A)", "a"},
		{"x$(A)y$(S)z", "xaysz"},
		{"$(EMPTY)", ""},
		{"$(MISSING)", "$(MISSING)"},
		{"$$(A)", "$(A)"},
		{"$$$(A)", "$a"},
		{"$A", "$A"},
		{"$", "$"},
		{"a$", "a$"},
		{"$(A", "$(A"},
		{"$()", "$()"},
		{"$(A)$(A", "a$(A"},
		{"no refs", "no refs"},
	}
	for _, tc := range cases {
		t.Run(tc.in, func(t *testing.T) {
			if got := Expand(tc.in, m); got != tc.want {
				t.Errorf("Expand(%q): got %q, want %q", tc.in, got, tc.want)
			}
		})
	}
}

type fakeSources struct {
	cms     map[string]*corev1.ConfigMap
	secrets map[string]*corev1.Secret
}

func (f fakeSources) ConfigMap(ns, name string) (*corev1.ConfigMap, error) {
	if cm, ok := f.cms[ns+"/"+name]; ok {
		return cm, nil
	}
	return nil, apierrors.NewNotFound(schema.GroupResource{Resource: "configmaps"}, name)
}

func (f fakeSources) Secret(ns, name string) (*corev1.Secret, error) {
	if s, ok := f.secrets[ns+"/"+name]; ok {
		return s, nil
	}
	return nil, apierrors.NewNotFound(schema.GroupResource{Resource: "secrets"}, name)
}

func TestContainer(t *testing.T) {
	src := fakeSources{
		cms:     map[string]*corev1.ConfigMap{"app/cfg": {Data: map[string]string{"MODE": "fast", "LEVEL": "3", "bad=key": "x"}}},
		secrets: map[string]*corev1.Secret{"app/creds": {Data: map[string][]byte{"PASSWORD": []byte("hunter2"), "USER": []byte("root")}}},
	}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "app", Name: "web-1", UID: "uid-1", Labels: map[string]string{"app": "web"}},
		Spec:       corev1.PodSpec{NodeName: "node-a", ServiceAccountName: "default"},
	}
	p := Pod{Pod: pod, PodIPs: []string{"10.244.1.5", "fd00::5"}, HostIPs: []string{"10.100.0.1"},
		Allocatable: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2"), corev1.ResourceMemory: resource.MustParse("1Gi")}}
	serviceEnv := map[string]string{"WEB_SERVICE_HOST": "10.96.0.30", "WEB_SERVICE_PORT": "80"}
	field := func(name, path string) corev1.EnvVar {
		return corev1.EnvVar{Name: name, ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: path}}}
	}
	cases := []struct {
		name    string
		c       corev1.Container
		want    map[string]string
		invalid []string
		wantErr string
	}{
		{name: "service env only", c: corev1.Container{},
			want: map[string]string{"WEB_SERVICE_HOST": "10.96.0.30", "WEB_SERVICE_PORT": "80"}},
		{name: "explicit env wins over service env", c: corev1.Container{Env: []corev1.EnvVar{{Name: "WEB_SERVICE_PORT", Value: "8080"}}},
			want: map[string]string{"WEB_SERVICE_HOST": "10.96.0.30", "WEB_SERVICE_PORT": "8080"}},
		{name: "expansion sees earlier env, envFrom and service env, not later env",
			c: corev1.Container{
				EnvFrom: []corev1.EnvFromSource{{ConfigMapRef: &corev1.ConfigMapEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "cfg"}}}},
				Env: []corev1.EnvVar{
					{Name: "URL", Value: "http://$(WEB_SERVICE_HOST):$(WEB_SERVICE_PORT)/$(MODE)/$(LATER)"},
					{Name: "LATER", Value: "l"},
					{Name: "EMPTY"},
				}},
			want: map[string]string{"WEB_SERVICE_HOST": "10.96.0.30", "WEB_SERVICE_PORT": "80", "MODE": "fast", "LEVEL": "3",
				"URL": "http://10.96.0.30:80/fast/$(LATER)", "LATER": "l", "EMPTY": ""},
			invalid: []string{"bad=key"}},
		{name: "envFrom prefix, secret, env overrides envFrom",
			c: corev1.Container{
				EnvFrom: []corev1.EnvFromSource{
					{Prefix: "DB_", SecretRef: &corev1.SecretEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "creds"}}},
					{ConfigMapRef: &corev1.ConfigMapEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "missing"}, Optional: ptr.To(true)}},
				},
				Env: []corev1.EnvVar{{Name: "DB_USER", Value: "app"}}},
			want: map[string]string{"WEB_SERVICE_HOST": "10.96.0.30", "WEB_SERVICE_PORT": "80", "DB_PASSWORD": "hunter2", "DB_USER": "app"}},
		{name: "fieldRefs", c: corev1.Container{Env: []corev1.EnvVar{
			field("NAME", "metadata.name"), field("NS", "metadata.namespace"), field("UID", "metadata.uid"),
			field("NODE", "spec.nodeName"), field("SA", "spec.serviceAccountName"), field("POD_IP", "status.podIP"),
			field("POD_IPS", "status.podIPs"), field("HOST_IP", "status.hostIP"), field("APP", "metadata.labels['app']"),
		}}, want: map[string]string{"WEB_SERVICE_HOST": "10.96.0.30", "WEB_SERVICE_PORT": "80",
			"NAME": "web-1", "NS": "app", "UID": "uid-1", "NODE": "node-a", "SA": "default", "POD_IP": "10.244.1.5",
			"POD_IPS": "10.244.1.5,fd00::5", "HOST_IP": "10.100.0.1", "APP": "web"}},
		{name: "key refs, optional missing ones left out", c: corev1.Container{Env: []corev1.EnvVar{
			{Name: "MODE", ValueFrom: &corev1.EnvVarSource{ConfigMapKeyRef: &corev1.ConfigMapKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "cfg"}, Key: "MODE"}}},
			{Name: "PW", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "creds"}, Key: "PASSWORD"}}},
			{Name: "NOKEY", ValueFrom: &corev1.EnvVarSource{ConfigMapKeyRef: &corev1.ConfigMapKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "cfg"}, Key: "nope", Optional: ptr.To(true)}}},
			{Name: "NOCM", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "gone"}, Key: "k", Optional: ptr.To(true)}}},
		}}, want: map[string]string{"WEB_SERVICE_HOST": "10.96.0.30", "WEB_SERVICE_PORT": "80", "MODE": "fast", "PW": "hunter2"}},
		{name: "resource refs", c: corev1.Container{
			Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("250m")}},
			Env: []corev1.EnvVar{
				{Name: "CPU_REQ", ValueFrom: &corev1.EnvVarSource{ResourceFieldRef: &corev1.ResourceFieldSelector{Resource: "requests.cpu"}}},
				{Name: "CPU_REQ_M", ValueFrom: &corev1.EnvVarSource{ResourceFieldRef: &corev1.ResourceFieldSelector{Resource: "requests.cpu", Divisor: resource.MustParse("1m")}}},
				{Name: "MEM_LIM", ValueFrom: &corev1.EnvVarSource{ResourceFieldRef: &corev1.ResourceFieldSelector{Resource: "limits.memory", Divisor: resource.MustParse("1Mi")}}},
			}}, want: map[string]string{"WEB_SERVICE_HOST": "10.96.0.30", "WEB_SERVICE_PORT": "80", "CPU_REQ": "1", "CPU_REQ_M": "250", "MEM_LIM": "1024"}},
		{name: "required key missing", c: corev1.Container{Env: []corev1.EnvVar{
			{Name: "X", ValueFrom: &corev1.EnvVarSource{ConfigMapKeyRef: &corev1.ConfigMapKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "cfg"}, Key: "nope"}}}}},
			wantErr: "couldn't find key nope in ConfigMap app/cfg"},
		{name: "required configmap missing", c: corev1.Container{EnvFrom: []corev1.EnvFromSource{{ConfigMapRef: &corev1.ConfigMapEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "gone"}}}}},
			wantErr: `configmap app/gone: configmaps "gone" not found`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			vars, invalid, err := Container(p, &tc.c, serviceEnv, src)
			if tc.wantErr != "" {
				if err == nil || err.Error() != tc.wantErr {
					t.Fatalf("got error %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			got := map[string]string{}
			for _, v := range vars {
				if _, dup := got[v.Name]; dup {
					t.Errorf("variable %s twice", v.Name)
				}
				got[v.Name] = v.Value
			}
			if !maps.Equal(got, tc.want) {
				t.Errorf("got %v, want %v", got, tc.want)
			}
			if !slices.Equal(invalid, tc.invalid) {
				t.Errorf("invalid keys: got %v, want %v", invalid, tc.invalid)
			}
			if !slices.IsSortedFunc(vars, func(a, b Var) int { return strings.Compare(a.Name, b.Name) }) {
				t.Errorf("got unsorted %v", vars)
			}
		})
	}
}

func TestExpandArgs(t *testing.T) {
	got := ExpandArgs([]string{"echo", "$(NAME)", "$$(NAME)", "$(NONE)"}, []Var{{"NAME", "web"}})
	want := []string{"echo", "web", "$(NAME)", "$(NONE)"}
	if !slices.Equal(got, want) {
		t.Errorf("got %v, want %v", got, want)
	}
}
