package main

import (
	"context"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
)

// podTimes is when the bench's own watch first saw each pod exist, bound
// to a node, and Ready.
type podTimes struct {
	created, scheduled, ready time.Time
}

// podObserver follows the pods of one label selector through a watch and
// keeps, per pod, when each step was first seen.
type podObserver struct {
	mu   sync.Mutex
	pods map[string]*podTimes
}

func observePods(ctx context.Context, c kubernetes.Interface, selector string) (*podObserver, error) {
	o := &podObserver{pods: map[string]*podTimes{}}
	f := informers.NewSharedInformerFactoryWithOptions(c, 0, informers.WithNamespace(namespace),
		informers.WithTweakListOptions(func(lo *metav1.ListOptions) { lo.LabelSelector = selector }))
	inf := f.Core().V1().Pods().Informer()
	onPod := func(obj any) {
		if p, ok := obj.(*corev1.Pod); ok {
			o.record(p, time.Now())
		}
	}
	inf.AddEventHandler(cache.ResourceEventHandlerFuncs{AddFunc: onPod, UpdateFunc: func(_, obj any) { onPod(obj) }})
	f.Start(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
		return nil, fmt.Errorf("pod informer for %s did not sync", selector)
	}
	return o, nil
}

func (o *podObserver) record(p *corev1.Pod, now time.Time) {
	o.mu.Lock()
	t := o.pods[p.Name]
	if t == nil {
		t = &podTimes{created: now}
		o.pods[p.Name] = t
	}
	if t.scheduled.IsZero() && p.Spec.NodeName != "" {
		t.scheduled = now
	}
	if t.ready.IsZero() && podReady(p) {
		t.ready = now
	}
	o.mu.Unlock()
}

// count is the number of pods seen.
func (o *podObserver) count() int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return len(o.pods)
}

func podReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// last is, once n pods have reached a step, the time the last of them did;
// zero before.
func (o *podObserver) last(n int, step func(*podTimes) time.Time) time.Time {
	o.mu.Lock()
	defer o.mu.Unlock()
	var last time.Time
	count := 0
	for _, t := range o.pods {
		if s := step(t); !s.IsZero() {
			count++
			if s.After(last) {
				last = s
			}
		}
	}
	if count < n {
		return time.Time{}
	}
	return last
}

// sliceObserver follows one Service's EndpointSlices and records when the
// number of ready endpoints first reached each value.
type sliceObserver struct {
	mu      sync.Mutex
	ready   map[string]int // slice name -> ready endpoints in it
	reached map[int]time.Time
}

func observeSlices(ctx context.Context, c kubernetes.Interface, service string) (*sliceObserver, error) {
	o := &sliceObserver{ready: map[string]int{}, reached: map[int]time.Time{}}
	f := informers.NewSharedInformerFactoryWithOptions(c, 0, informers.WithNamespace(namespace),
		informers.WithTweakListOptions(func(lo *metav1.ListOptions) { lo.LabelSelector = discoveryv1.LabelServiceName + "=" + service }))
	inf := f.Discovery().V1().EndpointSlices().Informer()
	onSlice := func(obj any, deleted bool) {
		if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
			obj = d.Obj
		}
		s, ok := obj.(*discoveryv1.EndpointSlice)
		if !ok {
			return
		}
		n := 0
		for _, ep := range s.Endpoints {
			if !deleted && ep.Conditions.Ready != nil && *ep.Conditions.Ready {
				n++
			}
		}
		o.record(s.Name, n, time.Now())
	}
	inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { onSlice(obj, false) },
		UpdateFunc: func(_, obj any) { onSlice(obj, false) },
		DeleteFunc: func(obj any) { onSlice(obj, true) },
	})
	f.Start(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
		return nil, fmt.Errorf("slice informer for %s did not sync", service)
	}
	return o, nil
}

func (o *sliceObserver) record(slice string, n int, now time.Time) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.ready[slice] = n
	total := 0
	for _, v := range o.ready {
		total += v
	}
	if _, ok := o.reached[total]; !ok {
		o.reached[total] = now
	}
}

// when is the time the slices first held n ready endpoints; zero before.
func (o *sliceObserver) when(n int) time.Time {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.reached[n]
}
