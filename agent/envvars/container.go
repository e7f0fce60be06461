package envvars

import (
	"fmt"
	"math"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
)

// Sources gives the ConfigMaps and Secrets a container's environment names.
// A missing object is reported with an error apierrors.IsNotFound accepts.
type Sources interface {
	ConfigMap(namespace, name string) (*corev1.ConfigMap, error)
	Secret(namespace, name string) (*corev1.Secret, error)
}

// Pod is what a container's environment may refer to beyond its spec: the
// addresses only known once the pod runs, and the node's allocatable
// resources (the value of a resourceFieldRef limit the container lacks).
type Pod struct {
	Pod         *corev1.Pod
	PodIPs      []string
	HostIPs     []string
	Allocatable corev1.ResourceList
}

// Container returns the environment of container c as kubelet builds it:
// envFrom first (later sources win, invalid names skipped and returned),
// then env in order, each value with $(VAR) expanded against the variables
// set so far and then serviceEnv, and last every service variable the
// container did not set itself. The result is sorted by name.
func Container(p Pod, c *corev1.Container, serviceEnv map[string]string, src Sources) (vars []Var, invalidKeys []string, err error) {
	b := &builder{pod: p, ns: p.Pod.Namespace, src: src, env: map[string]string{},
		configMaps: map[string]*corev1.ConfigMap{}, secrets: map[string]*corev1.Secret{}}
	if invalidKeys, err = b.envFrom(c.EnvFrom); err != nil {
		return nil, nil, err
	}
	for i := range c.Env {
		e := &c.Env[i]
		value, set, err := b.value(e, c, serviceEnv)
		if err != nil {
			return nil, nil, err
		}
		if set {
			b.env[e.Name] = value
		}
	}
	for k, v := range serviceEnv {
		if _, ok := b.env[k]; !ok {
			vars = append(vars, Var{k, v})
		}
	}
	for k, v := range b.env {
		vars = append(vars, Var{k, v})
	}
	sort.Slice(vars, func(i, j int) bool { return vars[i].Name < vars[j].Name })
	return vars, invalidKeys, nil
}

// builder is one container's environment being built, with the ConfigMaps
// and Secrets it read so far (each is read once).
type builder struct {
	pod        Pod
	ns         string
	src        Sources
	env        map[string]string
	configMaps map[string]*corev1.ConfigMap
	secrets    map[string]*corev1.Secret
}

func (b *builder) configMap(name string) (*corev1.ConfigMap, error) {
	if cm, ok := b.configMaps[name]; ok {
		return cm, nil
	}
	cm, err := b.src.ConfigMap(b.ns, name)
	if err == nil {
		b.configMaps[name] = cm
	}
	return cm, err
}

func (b *builder) secret(name string) (*corev1.Secret, error) {
	if s, ok := b.secrets[name]; ok {
		return s, nil
	}
	s, err := b.src.Secret(b.ns, name)
	if err == nil {
		b.secrets[name] = s
	}
	return s, err
}

// envFrom sets the variables of the container's envFrom sources, in
// order, and returns the keys skipped as invalid names, sorted.
func (b *builder) envFrom(sources []corev1.EnvFromSource) ([]string, error) {
	var invalidKeys []string
	set := func(prefix, k, v string) {
		k = prefix + k
		if !validName(k) {
			invalidKeys = append(invalidKeys, k)
			return
		}
		b.env[k] = v
	}
	for _, from := range sources {
		switch {
		case from.ConfigMapRef != nil:
			cm, err := b.configMap(from.ConfigMapRef.Name)
			if err != nil {
				if apierrors.IsNotFound(err) && isTrue(from.ConfigMapRef.Optional) {
					continue
				}
				return nil, fmt.Errorf("configmap %s/%s: %w", b.ns, from.ConfigMapRef.Name, err)
			}
			for k, v := range cm.Data {
				set(from.Prefix, k, v)
			}
		case from.SecretRef != nil:
			s, err := b.secret(from.SecretRef.Name)
			if err != nil {
				if apierrors.IsNotFound(err) && isTrue(from.SecretRef.Optional) {
					continue
				}
				return nil, fmt.Errorf("secret %s/%s: %w", b.ns, from.SecretRef.Name, err)
			}
			for k, v := range s.Data {
				set(from.Prefix, k, string(v))
			}
		}
	}
	sort.Strings(invalidKeys)
	return invalidKeys, nil
}

// value is the value of env var e of container c; set is false when an
// optional source is missing and the variable is left out.
func (b *builder) value(e *corev1.EnvVar, c *corev1.Container, serviceEnv map[string]string) (value string, set bool, err error) {
	switch {
	case e.Value != "":
		return Expand(e.Value, lookup(b.env, serviceEnv)), true, nil
	case e.ValueFrom == nil:
		return "", true, nil
	case e.ValueFrom.FieldRef != nil:
		if value, err = fieldValue(e.ValueFrom.FieldRef.FieldPath, b.pod); err != nil {
			return "", false, fmt.Errorf("env %s: %w", e.Name, err)
		}
		return value, true, nil
	case e.ValueFrom.ResourceFieldRef != nil:
		if value, err = resourceValue(e.ValueFrom.ResourceFieldRef, b.pod, c); err != nil {
			return "", false, fmt.Errorf("env %s: %w", e.Name, err)
		}
		return value, true, nil
	case e.ValueFrom.ConfigMapKeyRef != nil:
		return b.configMapKey(e.Name, e.ValueFrom.ConfigMapKeyRef)
	case e.ValueFrom.SecretKeyRef != nil:
		return b.secretKey(e.Name, e.ValueFrom.SecretKeyRef)
	}
	return "", true, nil
}

// configMapKey is the value of env var name from a ConfigMap key.
func (b *builder) configMapKey(name string, ref *corev1.ConfigMapKeySelector) (string, bool, error) {
	cm, err := b.configMap(ref.Name)
	if err != nil {
		if apierrors.IsNotFound(err) && isTrue(ref.Optional) {
			return "", false, nil
		}
		return "", false, fmt.Errorf("env %s: configmap %s/%s: %w", name, b.ns, ref.Name, err)
	}
	v, ok := cm.Data[ref.Key]
	if !ok {
		if isTrue(ref.Optional) {
			return "", false, nil
		}
		return "", false, fmt.Errorf("couldn't find key %s in ConfigMap %s/%s", ref.Key, b.ns, ref.Name)
	}
	return v, true, nil
}

// secretKey is the value of env var name from a Secret key.
func (b *builder) secretKey(name string, ref *corev1.SecretKeySelector) (string, bool, error) {
	s, err := b.secret(ref.Name)
	if err != nil {
		if apierrors.IsNotFound(err) && isTrue(ref.Optional) {
			return "", false, nil
		}
		return "", false, fmt.Errorf("env %s: secret %s/%s: %w", name, b.ns, ref.Name, err)
	}
	v, ok := s.Data[ref.Key]
	if !ok {
		if isTrue(ref.Optional) {
			return "", false, nil
		}
		return "", false, fmt.Errorf("couldn't find key %s in Secret %s/%s", ref.Key, b.ns, ref.Name)
	}
	return string(v), true, nil
}

func isTrue(b *bool) bool { return b != nil && *b }

// validName is the relaxed rule for environment variable names of current
// Kubernetes: printable ASCII except '=', not empty.
func validName(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < ' ' || s[i] > '~' || s[i] == '=' {
			return false
		}
	}
	return true
}

// lookup resolves $(NAME) against the maps in order; an unknown name stays
// as written.
func lookup(maps ...map[string]string) func(string) string {
	return func(name string) string {
		for _, m := range maps {
			if v, ok := m[name]; ok {
				return v
			}
		}
		return "$(" + name + ")"
	}
}

// fieldValue is the downward API value of a fieldRef path.
func fieldValue(path string, p Pod) (string, error) {
	pod := p.Pod
	first := func(s []string) string {
		if len(s) == 0 {
			return ""
		}
		return s[0]
	}
	switch path {
	case "metadata.name":
		return pod.Name, nil
	case "metadata.namespace":
		return pod.Namespace, nil
	case "metadata.uid":
		return string(pod.UID), nil
	case "spec.nodeName":
		return pod.Spec.NodeName, nil
	case "spec.serviceAccountName":
		return pod.Spec.ServiceAccountName, nil
	case "status.hostIP":
		return first(p.HostIPs), nil
	case "status.hostIPs":
		return strings.Join(p.HostIPs, ","), nil
	case "status.podIP":
		return first(p.PodIPs), nil
	case "status.podIPs":
		return strings.Join(p.PodIPs, ","), nil
	}
	if key, ok := subscript(path, "metadata.labels"); ok {
		return pod.Labels[key], nil
	}
	if key, ok := subscript(path, "metadata.annotations"); ok {
		return pod.Annotations[key], nil
	}
	return "", fmt.Errorf("unsupported fieldRef %q", path)
}

// subscript parses `field['key']`.
func subscript(path, field string) (string, bool) {
	rest, ok := strings.CutPrefix(path, field+"['")
	if !ok || !strings.HasSuffix(rest, "']") {
		return "", false
	}
	return strings.TrimSuffix(rest, "']"), true
}

// resourceValue is a resourceFieldRef's value: the container's request or
// limit (a missing limit is the node's allocatable), divided by the
// divisor and rounded up.
func resourceValue(ref *corev1.ResourceFieldSelector, p Pod, own *corev1.Container) (string, error) {
	c := own
	if ref.ContainerName != "" {
		c = nil
		for i := range p.Pod.Spec.Containers {
			if p.Pod.Spec.Containers[i].Name == ref.ContainerName {
				c = &p.Pod.Spec.Containers[i]
			}
		}
		if c == nil {
			return "", fmt.Errorf("no container %q", ref.ContainerName)
		}
	}
	kind, name, ok := strings.Cut(ref.Resource, ".")
	if !ok || (kind != "limits" && kind != "requests") {
		return "", fmt.Errorf("unsupported resource %q", ref.Resource)
	}
	rn := corev1.ResourceName(name)
	var q resource.Quantity
	if kind == "limits" {
		if v, ok := c.Resources.Limits[rn]; ok {
			q = v
		} else {
			q = p.Allocatable[rn]
		}
	} else {
		q = c.Resources.Requests[rn]
	}
	divisor := ref.Divisor
	if divisor.IsZero() {
		divisor = resource.MustParse("1")
	}
	if rn == corev1.ResourceCPU {
		return fmt.Sprint(int64(math.Ceil(float64(q.MilliValue()) / float64(divisor.MilliValue())))), nil
	}
	return fmt.Sprint(int64(math.Ceil(float64(q.Value()) / float64(divisor.Value())))), nil
}
