package scheme

import (
	"fmt"
	"strconv"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
)

// selectableFields returns, for a served object, the fields a field selector
// may name beyond metadata.name and metadata.namespace, with their values.
// The set of keys for a kind must not depend on the object's content.
func selectableFields(obj runtime.Object) fields.Set {
	switch o := obj.(type) {
	case *corev1.Pod:
		podIPs := make([]string, 0, len(o.Status.PodIPs))
		for _, ip := range o.Status.PodIPs {
			podIPs = append(podIPs, ip.IP)
		}
		return fields.Set{
			"spec.nodeName":            o.Spec.NodeName,
			"spec.restartPolicy":       string(o.Spec.RestartPolicy),
			"spec.schedulerName":       o.Spec.SchedulerName,
			"spec.serviceAccountName":  o.Spec.ServiceAccountName,
			"spec.hostNetwork":         strconv.FormatBool(o.Spec.HostNetwork),
			"status.phase":             string(o.Status.Phase),
			"status.podIP":             o.Status.PodIP,
			"status.podIPs":            strings.Join(podIPs, ","),
			"status.nominatedNodeName": o.Status.NominatedNodeName,
		}
	case *corev1.Node:
		return fields.Set{"spec.unschedulable": strconv.FormatBool(o.Spec.Unschedulable)}
	case *corev1.Namespace:
		return fields.Set{"status.phase": string(o.Status.Phase)}
	case *corev1.Secret:
		return fields.Set{"type": string(o.Type)}
	case *corev1.Service:
		return fields.Set{"spec.clusterIP": o.Spec.ClusterIP, "spec.type": string(o.Spec.Type)}
	case *appsv1.ReplicaSet:
		// The other apps/v1 kinds select on metadata only, as upstream.
		return fields.Set{"status.replicas": strconv.Itoa(int(o.Status.Replicas))}
	case *corev1.Event:
		return fields.Set{
			"involvedObject.kind":            o.InvolvedObject.Kind,
			"involvedObject.namespace":       o.InvolvedObject.Namespace,
			"involvedObject.name":            o.InvolvedObject.Name,
			"involvedObject.uid":             string(o.InvolvedObject.UID),
			"involvedObject.apiVersion":      o.InvolvedObject.APIVersion,
			"involvedObject.resourceVersion": o.InvolvedObject.ResourceVersion,
			"involvedObject.fieldPath":       o.InvolvedObject.FieldPath,
			"reason":                         o.Reason,
			"reportingComponent":             o.ReportingController,
			"source":                         o.Source.Component,
			"type":                           o.Type,
		}
	}
	return nil
}

// SelectableFields returns the field set of obj as field selectors see it:
// metadata.name, metadata.namespace (when namespaced) and the kind's own.
func SelectableFields(obj runtime.Object, name, namespace string, namespaced bool) fields.Set {
	set := selectableFields(obj)
	if set == nil {
		set = fields.Set{}
	}
	set["metadata.name"] = name
	if namespaced {
		set["metadata.namespace"] = namespace
	}
	return set
}

// addFieldSelectors teaches the scheme which field labels each served kind
// accepts, so that an unknown label is refused with a clear 400.
func addFieldSelectors(s *runtime.Scheme) error {
	for _, g := range Groups {
		for _, t := range g.Types {
			if strings.HasSuffix(fmt.Sprintf("%T", t), "List") {
				continue
			}
			allowed := selectableFields(t)
			kinds, _, err := s.ObjectKinds(t)
			if err != nil {
				return err
			}
			for _, gvk := range kinds {
				if gvk.Version == runtime.APIVersionInternal {
					continue
				}
				if err := s.AddFieldLabelConversionFunc(gvk, labelConversion(allowed)); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

func labelConversion(allowed fields.Set) runtime.FieldLabelConversionFunc {
	return func(label, value string) (string, string, error) {
		switch label {
		case "metadata.name", "metadata.namespace":
			return label, value, nil
		}
		if _, ok := allowed[label]; ok {
			return label, value, nil
		}
		return "", "", fmt.Errorf("field label not supported: %s", label)
	}
}
