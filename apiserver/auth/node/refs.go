package node

import (
	corev1 "k8s.io/api/core/v1"
)

// podRefs returns, each once, the Secrets, ConfigMaps,
// PersistentVolumeClaims and ServiceAccount pod refers to: the objects an
// agent must read to run it. The list follows what upstream's kubelet may
// fetch for a pod: image pull secrets, environment variables (env and
// envFrom of every kind of container), volumes (secret, configMap,
// projected, persistentVolumeClaim, generic ephemeral, and the secret
// references of volume plugins) and the service account.
func podRefs(pod *corev1.Pod) []ref {
	c := refCollector{namespace: pod.Namespace, seen: map[ref]bool{}}
	if sa := pod.Spec.ServiceAccountName; sa != "" {
		c.add(serviceAccountKind, sa)
	}
	for _, s := range pod.Spec.ImagePullSecrets {
		c.add(secretKind, s.Name)
	}
	for i := range pod.Spec.InitContainers {
		c.container(pod.Spec.InitContainers[i].Env, pod.Spec.InitContainers[i].EnvFrom)
	}
	for i := range pod.Spec.Containers {
		c.container(pod.Spec.Containers[i].Env, pod.Spec.Containers[i].EnvFrom)
	}
	for i := range pod.Spec.EphemeralContainers {
		c.container(pod.Spec.EphemeralContainers[i].Env, pod.Spec.EphemeralContainers[i].EnvFrom)
	}
	for i := range pod.Spec.Volumes {
		c.volume(pod.Name, &pod.Spec.Volumes[i])
	}
	return c.refs
}

type refCollector struct {
	namespace string
	seen      map[ref]bool
	refs      []ref
}

func (c *refCollector) add(k kind, name string) {
	if name == "" {
		return
	}
	r := ref{kind: k, namespace: c.namespace, name: name}
	if !c.seen[r] {
		c.seen[r] = true
		c.refs = append(c.refs, r)
	}
}

func (c *refCollector) container(env []corev1.EnvVar, envFrom []corev1.EnvFromSource) {
	for _, e := range envFrom {
		if e.SecretRef != nil {
			c.add(secretKind, e.SecretRef.Name)
		}
		if e.ConfigMapRef != nil {
			c.add(configMapKind, e.ConfigMapRef.Name)
		}
	}
	for _, e := range env {
		if e.ValueFrom == nil {
			continue
		}
		if s := e.ValueFrom.SecretKeyRef; s != nil {
			c.add(secretKind, s.Name)
		}
		if m := e.ValueFrom.ConfigMapKeyRef; m != nil {
			c.add(configMapKind, m.Name)
		}
	}
}

func (c *refCollector) volume(podName string, v *corev1.Volume) {
	switch {
	case v.Secret != nil:
		c.add(secretKind, v.Secret.SecretName)
	case v.ConfigMap != nil:
		c.add(configMapKind, v.ConfigMap.Name)
	case v.Projected != nil:
		for _, s := range v.Projected.Sources {
			if s.Secret != nil {
				c.add(secretKind, s.Secret.Name)
			}
			if s.ConfigMap != nil {
				c.add(configMapKind, s.ConfigMap.Name)
			}
		}
	case v.PersistentVolumeClaim != nil:
		c.add(pvcKind, v.PersistentVolumeClaim.ClaimName)
	case v.Ephemeral != nil:
		// A generic ephemeral volume's claim is named after the pod and
		// the volume, as the ephemeral volume controller names it.
		c.add(pvcKind, podName+"-"+v.Name)
	default:
		c.pluginSecret(v)
	}
}

// pluginSecret adds the Secret a volume plugin reads its credentials from.
func (c *refCollector) pluginSecret(v *corev1.Volume) {
	var name string
	switch {
	case v.AzureFile != nil:
		name = v.AzureFile.SecretName
	case v.CephFS != nil && v.CephFS.SecretRef != nil:
		name = v.CephFS.SecretRef.Name
	case v.Cinder != nil && v.Cinder.SecretRef != nil:
		name = v.Cinder.SecretRef.Name
	case v.FlexVolume != nil && v.FlexVolume.SecretRef != nil:
		name = v.FlexVolume.SecretRef.Name
	case v.RBD != nil && v.RBD.SecretRef != nil:
		name = v.RBD.SecretRef.Name
	case v.ScaleIO != nil && v.ScaleIO.SecretRef != nil:
		name = v.ScaleIO.SecretRef.Name
	case v.StorageOS != nil && v.StorageOS.SecretRef != nil:
		name = v.StorageOS.SecretRef.Name
	case v.CSI != nil && v.CSI.NodePublishSecretRef != nil:
		name = v.CSI.NodePublishSecretRef.Name
	case v.ISCSI != nil && v.ISCSI.SecretRef != nil:
		name = v.ISCSI.SecretRef.Name
	}
	c.add(secretKind, name)
}
