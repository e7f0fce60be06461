package defaults

import (
	"reflect"

	"github.com/distribution/reference"
	corev1 "k8s.io/api/core/v1"
)

// Default file modes of projected files, 0644 as upstream's
// *VolumeSourceDefaultMode constants.
const defaultVolumeMode int32 = 0o644

// defaultTokenExpirationSeconds is one hour, upstream's default for
// projected service account tokens.
const defaultTokenExpirationSeconds int64 = 3600

// Pod applies upstream's Pod defaults: PodSpec's, plus the ones only Pods
// (not templates) get: resource requests copied from limits, enableServiceLinks
// true, resize policies for requested cpu/memory, and hostPort = containerPort
// under hostNetwork. Status (phase etc.) is the registry's business.
func Pod(pod *corev1.Pod) {
	spec := &pod.Spec
	for i := range spec.Containers {
		requestsFromLimits(&spec.Containers[i].Resources)
		defaultResizePolicy(&spec.Containers[i])
	}
	for i := range spec.InitContainers {
		requestsFromLimits(&spec.InitContainers[i].Resources)
	}
	if spec.EnableServiceLinks == nil {
		enable := corev1.DefaultEnableServiceLinks
		spec.EnableServiceLinks = &enable
	}
	if spec.HostNetwork {
		defaultHostNetworkPorts(spec.Containers)
		defaultHostNetworkPorts(spec.InitContainers)
	}
	PodSpec(spec)
}

// PodSpec applies the defaults every PodSpec gets, in Pods and in
// templates: restartPolicy Always, dnsPolicy ClusterFirst, an empty
// securityContext, terminationGracePeriodSeconds 30, schedulerName
// default-scheduler, and the container and volume defaults.
func PodSpec(spec *corev1.PodSpec) {
	if spec.DNSPolicy == "" {
		spec.DNSPolicy = corev1.DNSClusterFirst
	}
	if spec.RestartPolicy == "" {
		spec.RestartPolicy = corev1.RestartPolicyAlways
	}
	if spec.SecurityContext == nil {
		spec.SecurityContext = &corev1.PodSecurityContext{}
	}
	if spec.TerminationGracePeriodSeconds == nil {
		period := int64(corev1.DefaultTerminationGracePeriodSeconds)
		spec.TerminationGracePeriodSeconds = &period
	}
	if spec.SchedulerName == "" {
		spec.SchedulerName = corev1.DefaultSchedulerName
	}
	for i := range spec.Containers {
		Container(&spec.Containers[i])
	}
	for i := range spec.InitContainers {
		Container(&spec.InitContainers[i])
	}
	for i := range spec.EphemeralContainers {
		Container((*corev1.Container)(&spec.EphemeralContainers[i].EphemeralContainerCommon))
	}
	for i := range spec.Volumes {
		Volume(&spec.Volumes[i])
	}
}

func requestsFromLimits(r *corev1.ResourceRequirements) {
	if r.Limits == nil {
		return
	}
	if r.Requests == nil {
		r.Requests = corev1.ResourceList{}
	}
	for name, q := range r.Limits {
		if _, ok := r.Requests[name]; !ok {
			r.Requests[name] = q.DeepCopy()
		}
	}
}

// defaultResizePolicy gives requested cpu and memory an in-place resize
// policy of NotRequired unless one is given.
func defaultResizePolicy(c *corev1.Container) {
	if c.Resources.Requests == nil {
		return
	}
	for _, name := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
		if _, requested := c.Resources.Requests[name]; !requested || hasResizePolicy(c, name) {
			continue
		}
		c.ResizePolicy = append(c.ResizePolicy, corev1.ContainerResizePolicy{ResourceName: name, RestartPolicy: corev1.NotRequired})
	}
}

func hasResizePolicy(c *corev1.Container, name corev1.ResourceName) bool {
	for _, p := range c.ResizePolicy {
		if p.ResourceName == name {
			return true
		}
	}
	return false
}

// defaultHostNetworkPorts: with host networking a container port is a host
// port.
func defaultHostNetworkPorts(containers []corev1.Container) {
	for i := range containers {
		for j := range containers[i].Ports {
			if p := &containers[i].Ports[j]; p.HostPort == 0 {
				p.HostPort = p.ContainerPort
			}
		}
	}
}

// Container applies upstream's container defaults: imagePullPolicy (Always
// for a ":latest" or untagged, undigested image, IfNotPresent otherwise),
// terminationMessagePath /dev/termination-log and policy File, port
// protocol TCP, probe and handler defaults, and apiVersion v1 on env
// fieldRefs.
func Container(c *corev1.Container) {
	if c.ImagePullPolicy == "" {
		c.ImagePullPolicy = defaultPullPolicy(c.Image)
	}
	if c.TerminationMessagePath == "" {
		c.TerminationMessagePath = corev1.TerminationMessagePathDefault
	}
	if c.TerminationMessagePolicy == "" {
		c.TerminationMessagePolicy = corev1.TerminationMessageReadFile
	}
	for i := range c.Ports {
		if c.Ports[i].Protocol == "" {
			c.Ports[i].Protocol = corev1.ProtocolTCP
		}
	}
	for _, p := range []*corev1.Probe{c.LivenessProbe, c.ReadinessProbe, c.StartupProbe} {
		if p != nil {
			Probe(p)
		}
	}
	if c.Lifecycle != nil {
		for _, h := range []*corev1.LifecycleHandler{c.Lifecycle.PostStart, c.Lifecycle.PreStop} {
			if h != nil && h.HTTPGet != nil {
				defaultHTTPGet(h.HTTPGet)
			}
		}
	}
	for i := range c.Env {
		if vf := c.Env[i].ValueFrom; vf != nil && vf.FieldRef != nil && vf.FieldRef.APIVersion == "" {
			vf.FieldRef.APIVersion = "v1"
		}
	}
}

// defaultPullPolicy mirrors upstream: images whose reference does not parse
// get IfNotPresent, as do images pinned by digest.
func defaultPullPolicy(image string) corev1.PullPolicy {
	named, err := reference.ParseNormalizedNamed(image)
	if err != nil {
		return corev1.PullIfNotPresent
	}
	tag := ""
	if tagged, ok := named.(reference.Tagged); ok {
		tag = tagged.Tag()
	}
	_, digested := named.(reference.Digested)
	if tag == "latest" || (tag == "" && !digested) {
		return corev1.PullAlways
	}
	return corev1.PullIfNotPresent
}

// Probe applies upstream's probe defaults: timeoutSeconds 1, periodSeconds
// 10, successThreshold 1, failureThreshold 3, and the handler defaults.
func Probe(p *corev1.Probe) {
	if p.TimeoutSeconds == 0 {
		p.TimeoutSeconds = 1
	}
	if p.PeriodSeconds == 0 {
		p.PeriodSeconds = 10
	}
	if p.SuccessThreshold == 0 {
		p.SuccessThreshold = 1
	}
	if p.FailureThreshold == 0 {
		p.FailureThreshold = 3
	}
	if p.HTTPGet != nil {
		defaultHTTPGet(p.HTTPGet)
	}
	if p.GRPC != nil && p.GRPC.Service == nil {
		service := ""
		p.GRPC.Service = &service
	}
}

func defaultHTTPGet(h *corev1.HTTPGetAction) {
	if h.Path == "" {
		h.Path = "/"
	}
	if h.Scheme == "" {
		h.Scheme = corev1.URISchemeHTTP
	}
}

// Volume applies upstream's volume defaults: an emptyDir when no source is
// set, file mode 0644 for secret, configMap, downwardAPI and projected
// volumes, a one-hour projected token, hostPath type "" and an ephemeral
// claim's volumeMode Filesystem.
func Volume(v *corev1.Volume) {
	src := &v.VolumeSource
	if allPtrFieldsNil(src) {
		src.EmptyDir = &corev1.EmptyDirVolumeSource{}
		return
	}
	// Each source is defaulted on its own; validation rejects more than one.
	if src.Secret != nil {
		defaultMode(&src.Secret.DefaultMode)
	}
	if src.ConfigMap != nil {
		defaultMode(&src.ConfigMap.DefaultMode)
	}
	if src.DownwardAPI != nil {
		defaultMode(&src.DownwardAPI.DefaultMode)
		defaultDownwardAPIItems(src.DownwardAPI.Items)
	}
	if src.Projected != nil {
		defaultProjected(src.Projected)
	}
	if src.HostPath != nil && src.HostPath.Type == nil {
		unset := corev1.HostPathUnset
		src.HostPath.Type = &unset
	}
	if src.Ephemeral != nil && src.Ephemeral.VolumeClaimTemplate != nil {
		if spec := &src.Ephemeral.VolumeClaimTemplate.Spec; spec.VolumeMode == nil {
			mode := corev1.PersistentVolumeFilesystem
			spec.VolumeMode = &mode
		}
	}
}

func defaultMode(m **int32) {
	if *m == nil {
		mode := defaultVolumeMode
		*m = &mode
	}
}

func defaultProjected(p *corev1.ProjectedVolumeSource) {
	defaultMode(&p.DefaultMode)
	for i := range p.Sources {
		s := &p.Sources[i]
		if s.ServiceAccountToken != nil && s.ServiceAccountToken.ExpirationSeconds == nil {
			exp := defaultTokenExpirationSeconds
			s.ServiceAccountToken.ExpirationSeconds = &exp
		}
		if s.DownwardAPI != nil {
			defaultDownwardAPIItems(s.DownwardAPI.Items)
		}
	}
}

func defaultDownwardAPIItems(items []corev1.DownwardAPIVolumeFile) {
	for i := range items {
		if f := items[i].FieldRef; f != nil && f.APIVersion == "" {
			f.APIVersion = "v1"
		}
	}
}

// allPtrFieldsNil reports whether every pointer field of the struct *p is
// nil, i.e. no volume source was chosen.
func allPtrFieldsNil(p any) bool {
	v := reflect.ValueOf(p).Elem()
	for i := 0; i < v.NumField(); i++ {
		if f := v.Field(i); f.Kind() == reflect.Pointer && !f.IsNil() {
			return false
		}
	}
	return true
}
