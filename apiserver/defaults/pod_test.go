package defaults

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/intstr"
)

func TestPod(t *testing.T) {
	pod := &corev1.Pod{Spec: corev1.PodSpec{
		Containers: []corev1.Container{{
			Name:  "app",
			Image: "nginx",
			Ports: []corev1.ContainerPort{{ContainerPort: 80}},
			Resources: corev1.ResourceRequirements{Limits: corev1.ResourceList{
				corev1.ResourceCPU: resource.MustParse("500m"),
			}},
			LivenessProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{
				HTTPGet: &corev1.HTTPGetAction{Port: intstr.FromInt32(80)},
			}},
			ReadinessProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{GRPC: &corev1.GRPCAction{Port: 9000}}},
			Env:            []corev1.EnvVar{{Name: "NODE", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "spec.nodeName"}}}},
		}},
		InitContainers: []corev1.Container{{Name: "init", Image: "busybox:1.36"}},
		Volumes: []corev1.Volume{
			{Name: "scratch"},
			{Name: "cfg", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{}}},
			{Name: "token", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{
				Sources: []corev1.VolumeProjection{{ServiceAccountToken: &corev1.ServiceAccountTokenProjection{Path: "token"}}},
			}}},
		},
	}}
	Pod(pod)
	spec := pod.Spec
	c := spec.Containers[0]
	cases := []struct {
		name      string
		got, want any
	}{
		{"restartPolicy", spec.RestartPolicy, corev1.RestartPolicyAlways},
		{"dnsPolicy", spec.DNSPolicy, corev1.DNSClusterFirst},
		{"terminationGracePeriodSeconds", *spec.TerminationGracePeriodSeconds, int64(30)},
		{"schedulerName", spec.SchedulerName, "default-scheduler"},
		{"securityContext", *spec.SecurityContext, corev1.PodSecurityContext{}},
		{"enableServiceLinks", *spec.EnableServiceLinks, true},
		{"imagePullPolicy untagged", c.ImagePullPolicy, corev1.PullAlways},
		{"imagePullPolicy tagged", spec.InitContainers[0].ImagePullPolicy, corev1.PullIfNotPresent},
		{"terminationMessagePath", c.TerminationMessagePath, "/dev/termination-log"},
		{"terminationMessagePolicy", c.TerminationMessagePolicy, corev1.TerminationMessageReadFile},
		{"init terminationMessagePolicy", spec.InitContainers[0].TerminationMessagePolicy, corev1.TerminationMessageReadFile},
		{"port protocol", c.Ports[0].Protocol, corev1.ProtocolTCP},
		{"hostPort without hostNetwork", c.Ports[0].HostPort, int32(0)},
		{"requests from limits", c.Resources.Requests.Cpu().String(), "500m"},
		{"resize policy", c.ResizePolicy, []corev1.ContainerResizePolicy{{ResourceName: corev1.ResourceCPU, RestartPolicy: corev1.NotRequired}}},
		{"probe timeoutSeconds", c.LivenessProbe.TimeoutSeconds, int32(1)},
		{"probe periodSeconds", c.LivenessProbe.PeriodSeconds, int32(10)},
		{"probe successThreshold", c.LivenessProbe.SuccessThreshold, int32(1)},
		{"probe failureThreshold", c.LivenessProbe.FailureThreshold, int32(3)},
		{"httpGet scheme", c.LivenessProbe.HTTPGet.Scheme, corev1.URISchemeHTTP},
		{"httpGet path", c.LivenessProbe.HTTPGet.Path, "/"},
		{"grpc service", *c.ReadinessProbe.GRPC.Service, ""},
		{"fieldRef apiVersion", c.Env[0].ValueFrom.FieldRef.APIVersion, "v1"},
		{"volume without source", spec.Volumes[0].EmptyDir != nil, true},
		{"configMap defaultMode", *spec.Volumes[1].ConfigMap.DefaultMode, int32(0o644)},
		{"projected defaultMode", *spec.Volumes[2].Projected.DefaultMode, int32(0o644)},
		{"token expiration", *spec.Volumes[2].Projected.Sources[0].ServiceAccountToken.ExpirationSeconds, int64(3600)},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			expect(t, tc.name, tc.got, tc.want)
		})
	}
}

func TestPodHostNetworkPorts(t *testing.T) {
	pod := &corev1.Pod{Spec: corev1.PodSpec{HostNetwork: true, Containers: []corev1.Container{{
		Name: "app", Image: "app:v1", Ports: []corev1.ContainerPort{{ContainerPort: 8080}},
	}}}}
	Pod(pod)
	expect(t, "hostPort", pod.Spec.Containers[0].Ports[0].HostPort, int32(8080))
}

func TestDefaultPullPolicy(t *testing.T) {
	cases := []struct {
		image string
		want  corev1.PullPolicy
	}{
		{"nginx", corev1.PullAlways},
		{"nginx:latest", corev1.PullAlways},
		{"registry.example.com:5000/team/app", corev1.PullAlways},
		{"registry.example.com:5000/team/app:v2", corev1.PullIfNotPresent},
		{"nginx@sha256:0123456789012345678901234567890123456789012345678901234567890123", corev1.PullIfNotPresent},
		{"nginx:latest@sha256:0123456789012345678901234567890123456789012345678901234567890123", corev1.PullAlways},
		{"Not/Valid", corev1.PullIfNotPresent},
		{"", corev1.PullIfNotPresent},
	}
	for _, tc := range cases {
		t.Run(tc.image, func(t *testing.T) {
			if got := defaultPullPolicy(tc.image); got != tc.want {
				t.Errorf("got %s, want %s", got, tc.want)
			}
		})
	}
}
