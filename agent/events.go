//go:build linux

package agent

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/tools/record"
)

// startEvents makes the agent record Events about its pods, as kubelet
// does (Created, Started, Killing, BackOff, Unhealthy, Failed), so that
// `kubectl describe pod` tells why a pod is not ready or restarts. They
// are written until ctx ends.
func (a *Agent) startEvents(ctx context.Context) {
	b := record.NewBroadcaster(record.WithContext(ctx))
	client := a.opts.EventClient
	if client == nil {
		client = a.client
	}
	b.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: client.CoreV1().Events("")})
	go func() { <-ctx.Done(); b.Shutdown() }()
	a.recorder = b.NewRecorder(scheme.Scheme, corev1.EventSource{Component: "kubelet", Host: a.opts.NodeName})
}

// event records an event about pod; nothing without a recorder (unit
// tests) or a pod (one already gone from the API).
func (a *Agent) event(pod *corev1.Pod, eventType, reason, format string, args ...any) {
	if a.recorder == nil || pod == nil {
		return
	}
	a.recorder.Eventf(pod, eventType, reason, format, args...)
}
