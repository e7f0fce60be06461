// Package podutil holds what several controllers ask of Pods: which Pods
// are bound to a Node and which Services select a Pod (through shared
// informer indexes), whether a Pod is Ready, and which port a Service's
// targetPort names on it.
package podutil

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
)

// nodeIndex indexes Pods by spec.nodeName; unscheduled Pods under "".
// Every controller shares it, so the informer keeps one index, not one
// per controller.
const nodeIndex = "portal.dev/pod-node"

// ByNode finds the Pods bound to a Node. Build it with NewByNode.
type ByNode struct {
	indexer cache.Indexer // nil: scan every Pod
	pods    corelisters.PodLister
}

// NewByNode adds the Pod-by-node index to inf, or finds it there when
// another controller added it first. When neither works (an informer that
// has already started), lookups scan every Pod.
func NewByNode(inf cache.SharedIndexInformer) *ByNode {
	b := &ByNode{pods: corelisters.NewPodLister(inf.GetIndexer())}
	if _, ok := inf.GetIndexer().GetIndexers()[nodeIndex]; ok {
		b.indexer = inf.GetIndexer()
		return b
	}
	err := inf.AddIndexers(cache.Indexers{nodeIndex: func(obj any) ([]string, error) {
		if pod, ok := obj.(*corev1.Pod); ok {
			return []string{pod.Spec.NodeName}, nil
		}
		return nil, nil
	}})
	if err != nil {
		utilruntime.HandleError(fmt.Errorf("add Pod index by node; lookups by node will scan all Pods: %w", err))
		return b
	}
	b.indexer = inf.GetIndexer()
	return b
}

// On returns the Pods bound to node; node "" gives the unscheduled ones.
func (b *ByNode) On(node string) ([]*corev1.Pod, error) {
	if b.indexer != nil {
		objs, err := b.indexer.ByIndex(nodeIndex, node)
		if err != nil {
			return nil, err
		}
		pods := make([]*corev1.Pod, 0, len(objs))
		for _, o := range objs {
			if pod, ok := o.(*corev1.Pod); ok {
				pods = append(pods, pod)
			}
		}
		return pods, nil
	}
	all, err := b.pods.List(labels.Everything())
	if err != nil {
		return nil, err
	}
	var pods []*corev1.Pod
	for _, p := range all {
		if p.Spec.NodeName == node {
			pods = append(pods, p)
		}
	}
	return pods, nil
}

// ReadyCondition returns the Pod's Ready condition, or nil.
func ReadyCondition(pod *corev1.Pod) *corev1.PodCondition {
	for i := range pod.Status.Conditions {
		if pod.Status.Conditions[i].Type == corev1.PodReady {
			return &pod.Status.Conditions[i]
		}
	}
	return nil
}

// IsReady reports whether the Pod's Ready condition is True.
func IsReady(pod *corev1.Pod) bool {
	c := ReadyCondition(pod)
	return c != nil && c.Status == corev1.ConditionTrue
}

// FindPort resolves a Service port's targetPort on pod, as upstream's
// endpoint controllers do: a number is used as is (0, an undefaulted
// targetPort, means the Service's own port), a name is looked up among the
// ports of the Pod's containers, then of its sidecars (init containers
// that keep running), with the Service port's protocol.
func FindPort(pod *corev1.Pod, sp *corev1.ServicePort) (int32, bool) {
	if sp.TargetPort.Type == intstr.Int {
		if sp.TargetPort.IntVal == 0 {
			return sp.Port, true
		}
		return sp.TargetPort.IntVal, true
	}
	name := sp.TargetPort.StrVal
	for _, c := range pod.Spec.Containers {
		if n, ok := namedPort(c.Ports, name, sp.Protocol); ok {
			return n, true
		}
	}
	for _, c := range pod.Spec.InitContainers {
		if c.RestartPolicy == nil || *c.RestartPolicy != corev1.ContainerRestartPolicyAlways {
			continue
		}
		if n, ok := namedPort(c.Ports, name, sp.Protocol); ok {
			return n, true
		}
	}
	return 0, false
}

func namedPort(ports []corev1.ContainerPort, name string, proto corev1.Protocol) (int32, bool) {
	for _, p := range ports {
		if p.Name == name && p.Protocol == proto {
			return p.ContainerPort, true
		}
	}
	return 0, false
}
