package validation

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// validPod is a valid, defaulted Pod.
func validPod() *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "web-0", Namespace: "ns", ResourceVersion: "1"},
		Spec: corev1.PodSpec{
			Containers: []corev1.Container{{
				Name:                     "app",
				Image:                    "nginx:1.27",
				ImagePullPolicy:          corev1.PullIfNotPresent,
				TerminationMessagePolicy: corev1.TerminationMessageReadFile,
				Ports:                    []corev1.ContainerPort{{Name: "http", ContainerPort: 8080, Protocol: corev1.ProtocolTCP}},
				ReadinessProbe: &corev1.Probe{
					ProbeHandler:   corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/", Port: intstr.FromString("http"), Scheme: corev1.URISchemeHTTP}},
					TimeoutSeconds: 1, PeriodSeconds: 10, SuccessThreshold: 1, FailureThreshold: 3,
				},
			}},
			Volumes:                       []corev1.Volume{{Name: "scratch", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}},
			RestartPolicy:                 corev1.RestartPolicyAlways,
			DNSPolicy:                     corev1.DNSClusterFirst,
			TerminationGracePeriodSeconds: ptr(int64(30)),
		},
	}
}

func TestValidatePod(t *testing.T) {
	ctr := func(p *corev1.Pod) *corev1.Container { return &p.Spec.Containers[0] }
	secondContainer := func(p *corev1.Pod) {
		c := *ctr(p).DeepCopy()
		c.Name = "sidecar"
		c.Ports = []corev1.ContainerPort{{Name: "metrics", ContainerPort: 9090, Protocol: corev1.ProtocolTCP}}
		p.Spec.Containers = append(p.Spec.Containers, c)
	}
	cases := []struct {
		name string
		edit func(*corev1.Pod)
		want []wantErr
	}{
		{name: "valid"},
		{name: "containers required", edit: func(p *corev1.Pod) { p.Spec.Containers = nil },
			want: []wantErr{e("spec.containers", tRequired)}},
		{name: "container name required", edit: func(p *corev1.Pod) { ctr(p).Name = "" },
			want: []wantErr{e("spec.containers[0].name", tRequired)}},
		{name: "container name not a label", edit: func(p *corev1.Pod) { ctr(p).Name = "App" },
			want: []wantErr{e("spec.containers[0].name", tInvalid)}},
		{name: "duplicate container names", edit: func(p *corev1.Pod) { secondContainer(p); p.Spec.Containers[1].Name = "app" },
			want: []wantErr{e("spec.containers[1].name", tDuplicate)}},
		{name: "image required", edit: func(p *corev1.Pod) { ctr(p).Image = "" },
			want: []wantErr{e("spec.containers[0].image", tRequired)}},
		{name: "image with spaces", edit: func(p *corev1.Pod) { ctr(p).Image = " nginx" },
			want: []wantErr{e("spec.containers[0].image", tInvalid, "must not have leading or trailing whitespace")}},
		{name: "imagePullPolicy unknown", edit: func(p *corev1.Pod) { ctr(p).ImagePullPolicy = "Sometimes" },
			want: []wantErr{e("spec.containers[0].imagePullPolicy", tNotSupported)}},
		{name: "containerPort required", edit: func(p *corev1.Pod) { ctr(p).Ports[0].ContainerPort = 0 },
			want: []wantErr{e("spec.containers[0].ports[0].containerPort", tRequired)}},
		{name: "containerPort too big", edit: func(p *corev1.Pod) { ctr(p).Ports[0].ContainerPort = 70000 },
			want: []wantErr{e("spec.containers[0].ports[0].containerPort", tInvalid, "must be between 1 and 65535")}},
		{name: "port name too long", edit: func(p *corev1.Pod) { ctr(p).Ports[0].Name = "http-alternative" },
			want: []wantErr{e("spec.containers[0].ports[0].name", tInvalid, "must be no more than 15 characters")}},
		{name: "port name 123-abc", edit: func(p *corev1.Pod) { ctr(p).Ports[0].Name = "123-abc"; ctr(p).ReadinessProbe = nil }},
		{name: "port name 123_abc", edit: func(p *corev1.Pod) { ctr(p).Ports[0].Name = "123_abc"; ctr(p).ReadinessProbe = nil },
			want: []wantErr{e("spec.containers[0].ports[0].name", tInvalid, "must contain only alpha-numeric characters")}},
		{name: "duplicate port names in a container", edit: func(p *corev1.Pod) {
			ctr(p).Ports = append(ctr(p).Ports, corev1.ContainerPort{Name: "http", ContainerPort: 8081, Protocol: corev1.ProtocolTCP})
		}, want: []wantErr{e("spec.containers[0].ports[1].name", tDuplicate)}},
		{name: "same port name in two containers", edit: func(p *corev1.Pod) { secondContainer(p); p.Spec.Containers[1].Ports[0].Name = "http" }},
		{name: "host port conflict", edit: func(p *corev1.Pod) {
			secondContainer(p)
			p.Spec.Containers[0].Ports[0].HostPort, p.Spec.Containers[1].Ports[0].HostPort = 80, 80
		}, want: []wantErr{e("spec.containers[1].ports[0].hostPort", tDuplicate)}},
		{name: "hostNetwork port mismatch", edit: func(p *corev1.Pod) { p.Spec.HostNetwork = true; ctr(p).Ports[0].HostPort = 80 },
			want: []wantErr{e("spec.containers[0].ports[0].hostPort", tInvalid, "must match `containerPort` when `hostNetwork` is true")}},
		{name: "port protocol required", edit: func(p *corev1.Pod) { ctr(p).Ports[0].Protocol = "" },
			want: []wantErr{e("spec.containers[0].ports[0].protocol", tRequired)}},
		{name: "restartPolicy unknown", edit: func(p *corev1.Pod) { p.Spec.RestartPolicy = "Sometimes" },
			want: []wantErr{e("spec.restartPolicy", tNotSupported, `"Always", "OnFailure", "Never"`)}},
		{name: "dnsPolicy required", edit: func(p *corev1.Pod) { p.Spec.DNSPolicy = "" },
			want: []wantErr{e("spec.dnsPolicy", tRequired)}},
		{name: "dnsPolicy None needs dnsConfig", edit: func(p *corev1.Pod) { p.Spec.DNSPolicy = corev1.DNSNone },
			want: []wantErr{e("spec.dnsConfig", tRequired, "must provide `dnsConfig` when `dnsPolicy` is None")}},
		{name: "dnsConfig", edit: func(p *corev1.Pod) {
			p.Spec.DNSPolicy = corev1.DNSNone
			p.Spec.DNSConfig = &corev1.PodDNSConfig{Nameservers: []string{"192.0.2.53"}, Searches: []string{"svc.cluster.local.", "_srv.example.com", "."}}
		}},
		{name: "dnsConfig nameserver invalid", edit: func(p *corev1.Pod) {
			p.Spec.DNSConfig = &corev1.PodDNSConfig{Nameservers: []string{"dns.example.com"}}
		}, want: []wantErr{e("spec.dnsConfig.nameservers[0]", tInvalid)}},
		{name: "terminationGracePeriodSeconds required", edit: func(p *corev1.Pod) { p.Spec.TerminationGracePeriodSeconds = nil },
			want: []wantErr{e("spec.terminationGracePeriodSeconds", tRequired)}},
		{name: "hostname and subdomain", edit: func(p *corev1.Pod) { p.Spec.Hostname, p.Spec.Subdomain = "web-0", "web" }},
		{name: "hostname not a label", edit: func(p *corev1.Pod) { p.Spec.Hostname = "web.0" },
			want: []wantErr{e("spec.hostname", tInvalid)}},
		{name: "subdomain not a label", edit: func(p *corev1.Pod) { p.Spec.Subdomain = "Web" },
			want: []wantErr{e("spec.subdomain", tInvalid)}},
		{name: "serviceAccountName invalid", edit: func(p *corev1.Pod) { p.Spec.ServiceAccountName = "Builder" },
			want: []wantErr{e("spec.serviceAccountName", tInvalid)}},
		{name: "nodeName invalid", edit: func(p *corev1.Pod) { p.Spec.NodeName = "node_1" },
			want: []wantErr{e("spec.nodeName", tInvalid)}},
		{name: "activeDeadlineSeconds zero", edit: func(p *corev1.Pod) { p.Spec.ActiveDeadlineSeconds = ptr(int64(0)) },
			want: []wantErr{e("spec.activeDeadlineSeconds", tInvalid, "must be between 1 and 2147483647, inclusive")}},
		{name: "volume name duplicate", edit: func(p *corev1.Pod) { p.Spec.Volumes = append(p.Spec.Volumes, p.Spec.Volumes[0]) },
			want: []wantErr{e("spec.volumes[1].name", tDuplicate)}},
		{name: "volume without source", edit: func(p *corev1.Pod) { p.Spec.Volumes[0].EmptyDir = nil },
			want: []wantErr{e("spec.volumes[0]", tRequired, "must specify a volume type")}},
		{name: "volume with two sources", edit: func(p *corev1.Pod) { p.Spec.Volumes[0].ConfigMap = &corev1.ConfigMapVolumeSource{} },
			want: []wantErr{e("spec.volumes[0].configMap", tForbidden, "may not specify more than 1 volume type")}},
		{name: "probe without handler", edit: func(p *corev1.Pod) { ctr(p).ReadinessProbe.HTTPGet = nil },
			want: []wantErr{e("spec.containers[0].readinessProbe", tRequired, "must specify a handler type")}},
		{name: "probe with two handlers", edit: func(p *corev1.Pod) {
			ctr(p).ReadinessProbe.TCPSocket = &corev1.TCPSocketAction{Port: intstr.FromInt32(8080)}
		}, want: []wantErr{e("spec.containers[0].readinessProbe.tcpSocket", tForbidden, "may not specify more than 1 handler type")}},
		{name: "httpGet scheme unknown", edit: func(p *corev1.Pod) { ctr(p).ReadinessProbe.HTTPGet.Scheme = "FTP" },
			want: []wantErr{e("spec.containers[0].readinessProbe.httpGet.scheme", tNotSupported)}},
		{name: "liveness successThreshold must be 1", edit: func(p *corev1.Pod) {
			probe := ctr(p).ReadinessProbe.DeepCopy()
			probe.SuccessThreshold = 2
			ctr(p).LivenessProbe = probe
		}, want: []wantErr{e("spec.containers[0].livenessProbe.successThreshold", tInvalid, "must be 1")}},
		{name: "negative probe period", edit: func(p *corev1.Pod) { ctr(p).ReadinessProbe.PeriodSeconds = -1 },
			want: []wantErr{e("spec.containers[0].readinessProbe.periodSeconds", tInvalid, "must be greater than or equal to 0")}},
		{name: "init container probe", edit: func(p *corev1.Pod) {
			c := *ctr(p).DeepCopy()
			c.Name = "init"
			p.Spec.InitContainers = []corev1.Container{c}
		}, want: []wantErr{e("spec.initContainers[0].readinessProbe", tForbidden, "may not be set for init containers without restartPolicy=Always")}},
		{name: "sidecar may have probes", edit: func(p *corev1.Pod) {
			c := *ctr(p).DeepCopy()
			c.Name, c.RestartPolicy = "proxy", ptr(corev1.ContainerRestartPolicyAlways)
			c.Ports[0].ContainerPort = 15001
			p.Spec.InitContainers = []corev1.Container{c}
		}},
		{name: "init container name clash", edit: func(p *corev1.Pod) {
			p.Spec.InitContainers = []corev1.Container{{Name: "app", Image: "busybox", ImagePullPolicy: corev1.PullIfNotPresent, TerminationMessagePolicy: corev1.TerminationMessageReadFile}}
		}, want: []wantErr{e("spec.initContainers[0].name", tDuplicate)}},
		{name: "restartPolicy on regular container", edit: func(p *corev1.Pod) { ctr(p).RestartPolicy = ptr(corev1.ContainerRestartPolicyAlways) },
			want: []wantErr{e("spec.containers[0].restartPolicy", tForbidden, "may not be set for non-init containers")}},
		{name: "name invalid", edit: func(p *corev1.Pod) { p.Name = "Web" }, want: []wantErr{e("metadata.name", tInvalid)}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := validPod()
			if tc.edit != nil {
				tc.edit(p)
			}
			checkErrs(t, ValidatePod(p), tc.want...)
		})
	}
}

func TestValidatePodUpdate(t *testing.T) {
	cases := []struct {
		name string
		old  func(*corev1.Pod)
		edit func(*corev1.Pod)
		want []wantErr
	}{
		{name: "image may change", edit: func(p *corev1.Pod) { p.Spec.Containers[0].Image = "nginx:1.28" }},
		{name: "labels may change", edit: func(p *corev1.Pod) { p.Labels = map[string]string{"a": "b"} }},
		{name: "tolerations may be added", edit: func(p *corev1.Pod) {
			p.Spec.Tolerations = []corev1.Toleration{{Key: "k", Operator: corev1.TolerationOpExists}}
		}},
		{name: "tolerations may not be removed", old: func(p *corev1.Pod) {
			p.Spec.Tolerations = []corev1.Toleration{{Key: "k", Operator: corev1.TolerationOpExists}}
		}, edit: func(p *corev1.Pod) { p.Spec.Tolerations = nil },
			want: []wantErr{e("spec.tolerations", tForbidden, "existing toleration can not be modified except its tolerationSeconds")}},
		{name: "activeDeadlineSeconds may shrink", old: func(p *corev1.Pod) { p.Spec.ActiveDeadlineSeconds = ptr(int64(60)) },
			edit: func(p *corev1.Pod) { p.Spec.ActiveDeadlineSeconds = ptr(int64(30)) }},
		{name: "activeDeadlineSeconds may not grow", old: func(p *corev1.Pod) { p.Spec.ActiveDeadlineSeconds = ptr(int64(60)) },
			edit: func(p *corev1.Pod) { p.Spec.ActiveDeadlineSeconds = ptr(int64(90)) },
			want: []wantErr{e("spec.activeDeadlineSeconds", tInvalid, "must be less than or equal to previous value")}},
		{name: "scheduling gate may be removed", old: func(p *corev1.Pod) { p.Spec.SchedulingGates = []corev1.PodSchedulingGate{{Name: "example.com/wait"}} },
			edit: func(p *corev1.Pod) { p.Spec.SchedulingGates = nil }},
		{name: "scheduling gate may not be added", edit: func(p *corev1.Pod) {
			p.Spec.SchedulingGates = []corev1.PodSchedulingGate{{Name: "example.com/wait"}}
		}, want: []wantErr{e("spec.schedulingGates[0].name", tForbidden, "only deletion is allowed")}},
		{name: "other spec fields immutable", edit: func(p *corev1.Pod) { p.Spec.NodeName = "node-2" },
			want: []wantErr{e("spec", tForbidden, "pod updates may not change fields other than `spec.containers[*].image`")}},
		{name: "containers may not be added", edit: func(p *corev1.Pod) {
			c := p.Spec.Containers[0]
			c.Name = "second"
			p.Spec.Containers = append(p.Spec.Containers, c)
		}, want: []wantErr{e("spec.containers", tForbidden, "pod updates may not add or remove containers")}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			old := validPod()
			if tc.old != nil {
				tc.old(old)
			}
			p := old.DeepCopy()
			if tc.edit != nil {
				tc.edit(p)
			}
			checkErrs(t, ValidatePodUpdate(p, old), tc.want...)
		})
	}
}
