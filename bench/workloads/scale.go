package main

import (
	"context"
	"fmt"
	"os"
	"slices"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"

	"portal.dev/portal/bench/internal/host"
)

// deployment is a Deployment of pods labelled app=name that run a command,
// as the examples do (no image is pulled).
func deployment(name string, replicas int32) *appsv1.Deployment {
	labels := map[string]string{"app": name}
	surge, unav := intstr.FromString("25%"), intstr.Parse(*maxUnav)
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: appsv1.DeploymentSpec{
			Replicas: &replicas,
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Strategy: appsv1.DeploymentStrategy{Type: appsv1.RollingUpdateDeploymentStrategyType,
				RollingUpdate: &appsv1.RollingUpdateDeployment{MaxSurge: &surge, MaxUnavailable: &unav}},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "none",
					Command: []string{"sleep", "infinity"}, Ports: []corev1.ContainerPort{{ContainerPort: 8080}}}}},
			},
		},
	}
}

// scaleRun scales Deployment "web", behind Service "web", from 0 to
// *replicas through the scale subresource and reports when the pods
// existed, were scheduled, were ready and were all ready in the slices.
func scaleRun(ctx context.Context, c kubernetes.Interface, pid int, anchorCPU time.Duration) error {
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "web"}, Spec: corev1.ServiceSpec{
		Selector: map[string]string{"app": "web"},
		Ports:    []corev1.ServicePort{{Name: "http", Port: 80, TargetPort: intstr.FromInt32(8080)}}}}
	if _, err := c.CoreV1().Services(namespace).Create(ctx, svc, metav1.CreateOptions{}); err != nil {
		return err
	}
	sc, err := newScaler(ctx, c, *via)
	if err != nil {
		return err
	}
	pods, err := observePods(ctx, c, "app=web")
	if err != nil {
		return err
	}
	eps, err := observeSlices(ctx, c, "web")
	if err != nil {
		return err
	}
	work, err := readEndpointWork(ctx, c)
	if err != nil {
		return err
	}
	cpu0, t0 := host.CPU(pid), time.Now()
	prof := startProfile(ctx, c, "scale")
	if err := sc(int32(*replicas)); err != nil {
		return err
	}
	r, err := follow(ctx, pods, eps, pid, *replicas, 5*time.Minute)
	if err != nil {
		return err
	}
	r.report("scale", t0, cpu0, anchorCPU)
	reportEndpointWork(ctx, c, "scale", work)
	prof()
	return nil
}

// newScaler creates workload "web" of kind ("deployment" or "replicaset")
// with no replicas, waits for its controller to have seen it, and returns
// a function that scales it through the scale subresource, as `kubectl
// scale` does.
func newScaler(ctx context.Context, c kubernetes.Interface, kind string) (func(int32) error, error) {
	d := deployment("web", 0)
	switch kind {
	case "deployment":
		if _, err := c.AppsV1().Deployments(namespace).Create(ctx, d, metav1.CreateOptions{}); err != nil {
			return nil, err
		}
		if _, err := waitComplete(ctx, c, "web", time.Minute); err != nil {
			return nil, err
		}
		return func(n int32) error {
			s, err := c.AppsV1().Deployments(namespace).GetScale(ctx, "web", metav1.GetOptions{})
			if err == nil {
				s.Spec.Replicas = n
				_, err = c.AppsV1().Deployments(namespace).UpdateScale(ctx, "web", s, metav1.UpdateOptions{})
			}
			return err
		}, nil
	case "replicaset":
		rs := &appsv1.ReplicaSet{ObjectMeta: d.ObjectMeta, Spec: appsv1.ReplicaSetSpec{Replicas: d.Spec.Replicas,
			Selector: d.Spec.Selector, Template: d.Spec.Template}}
		if _, err := c.AppsV1().ReplicaSets(namespace).Create(ctx, rs, metav1.CreateOptions{}); err != nil {
			return nil, err
		}
		return func(n int32) error {
			s, err := c.AppsV1().ReplicaSets(namespace).GetScale(ctx, "web", metav1.GetOptions{})
			if err == nil {
				s.Spec.Replicas = n
				_, err = c.AppsV1().ReplicaSets(namespace).UpdateScale(ctx, "web", s, metav1.UpdateOptions{})
			}
			return err
		}, nil
	}
	return nil, fmt.Errorf("-via %q: want deployment or replicaset", kind)
}

// scaleResult is what follow saw: when the last pod reached each step, and
// the server's CPU time when every pod existed and when all were published.
type scaleResult struct {
	n                                   int
	created, scheduled, ready, endpoint time.Time
	cpuCreated, cpuEndpoint             time.Duration
}

// follow waits until n pods are ready in the slices and the pod informer
// has seen each of them scheduled and Ready, sampling the server's CPU
// time when the last pod appears and when the last endpoint does.
func follow(ctx context.Context, pods *podObserver, eps *sliceObserver, pid, n int, limit time.Duration) (*scaleResult, error) {
	r := &scaleResult{n: n}
	deadline := time.After(limit)
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-tick.C:
		case <-deadline:
			return nil, fmt.Errorf("scale: after %s: %d pods, %d ready endpoints", limit, pods.count(), eps.most())
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		if r.created.IsZero() {
			if r.created = pods.last(n, func(t *podTimes) time.Time { return t.created }); !r.created.IsZero() {
				r.cpuCreated = host.CPU(pid)
			}
		}
		if r.endpoint.IsZero() {
			if r.endpoint = eps.when(n); !r.endpoint.IsZero() {
				r.cpuEndpoint = host.CPU(pid)
			}
		}
		// The slice informer may hear of the last endpoint before the
		// pod informer hears of the last pod's steps: wait for both.
		r.scheduled = pods.last(n, func(t *podTimes) time.Time { return t.scheduled })
		r.ready = pods.last(n, func(t *podTimes) time.Time { return t.ready })
		if !r.endpoint.IsZero() && !r.scheduled.IsZero() && !r.ready.IsZero() {
			return r, nil
		}
	}
}

// most is the highest number of ready endpoints the slices have held.
func (s *sliceObserver) most() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	m := 0
	for k := range s.reached {
		m = max(m, k)
	}
	return m
}

func (r *scaleResult) report(what string, t0 time.Time, cpu0, anchorCPU time.Duration) {
	ms := func(t time.Time) string { return t.Sub(t0).Round(time.Millisecond).String() }
	perPod := (r.cpuEndpoint - cpu0) / time.Duration(r.n)
	perCreated := (r.cpuCreated - cpu0) / time.Duration(r.n)
	fmt.Printf("RESULT %s pods=%d all_exist=%s pods_created_per_s=%.0f all_scheduled=%s all_ready=%s all_in_slices=%s\n",
		what, r.n, ms(r.created), float64(r.n)/r.created.Sub(t0).Seconds(), ms(r.scheduled), ms(r.ready), ms(r.endpoint))
	fmt.Printf("RESULT %s last_ready_to_slices=%s (goal <= 1s)\n", what, r.endpoint.Sub(r.ready).Round(time.Millisecond))
	fmt.Printf("RESULT %s server_cpu_per_pod=%s (until all in slices; %s until all exist) anchor_cpu_per_service_create=%s ratio=%.2f\n",
		what, perPod.Round(time.Microsecond), perCreated.Round(time.Microsecond), anchorCPU.Round(time.Microsecond),
		perPod.Seconds()/anchorCPU.Seconds())
}

// rolloutRun creates Deployment "roll" with *rollN replicas, waits for it,
// then changes its template *rounds times and times each rollout.
func rolloutRun(ctx context.Context, c kubernetes.Interface) error {
	if _, err := c.AppsV1().Deployments(namespace).Create(ctx, deployment("roll", int32(*rollN)), metav1.CreateOptions{}); err != nil {
		return err
	}
	if _, err := waitComplete(ctx, c, "roll", 5*time.Minute); err != nil {
		return fmt.Errorf("first rollout: %w", err)
	}
	var took []time.Duration
	for i := range *rounds {
		patch := fmt.Sprintf(`{"spec":{"template":{"metadata":{"annotations":{"bench/round":"%d"}}}}}`, i)
		t0 := time.Now()
		if _, err := c.AppsV1().Deployments(namespace).Patch(ctx, "roll", types.MergePatchType, []byte(patch),
			metav1.PatchOptions{}); err != nil {
			return err
		}
		d, err := waitComplete(ctx, c, "roll", 5*time.Minute)
		if err != nil {
			return fmt.Errorf("rollout %d: %w", i, err)
		}
		took = append(took, d.Sub(t0))
		fmt.Printf("RESULT rollout replicas=%d round=%d took=%s (goal < 10s)\n", *rollN, i, d.Sub(t0).Round(time.Millisecond))
	}
	if len(took) > 0 {
		fmt.Printf("RESULT rollout median=%s of %d\n", median(took).Round(time.Millisecond), len(took))
	}
	return nil
}

// waitComplete watches Deployment name until it is complete as `kubectl
// rollout status` decides it, and returns when the watch saw that.
func waitComplete(ctx context.Context, c kubernetes.Interface, name string, limit time.Duration) (time.Time, error) {
	ctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	w, err := c.AppsV1().Deployments(namespace).Watch(ctx, metav1.ListOptions{FieldSelector: "metadata.name=" + name})
	if err != nil {
		return time.Time{}, err
	}
	defer w.Stop()
	var last *appsv1.Deployment
	for ev := range w.ResultChan() {
		d, ok := ev.Object.(*appsv1.Deployment)
		if !ok || ev.Type == watch.Deleted {
			continue
		}
		last = d
		if complete(d) {
			return time.Now(), nil
		}
	}
	if last != nil {
		return time.Time{}, fmt.Errorf("deployment %s not complete after %s: %+v", name, limit, last.Status)
	}
	return time.Time{}, fmt.Errorf("deployment %s not seen in %s", name, limit)
}

// complete is kubectl rollout status's test: the newest generation
// observed, every replica updated, no old replica left, all available.
func complete(d *appsv1.Deployment) bool {
	s := d.Status
	want := int32(1)
	if d.Spec.Replicas != nil {
		want = *d.Spec.Replicas
	}
	return d.Generation <= s.ObservedGeneration && s.UpdatedReplicas == want &&
		s.Replicas == s.UpdatedReplicas && s.AvailableReplicas == s.UpdatedReplicas
}

func median(d []time.Duration) time.Duration {
	return slices.Sorted(slices.Values(d))[len(d)/2]
}

// startProfile starts the server's CPU profile if -profile-run names run,
// and returns the function that waits for it.
func startProfile(ctx context.Context, c kubernetes.Interface, run string) (wait func()) {
	if *profRun != run {
		return func() {}
	}
	var profiles []func() error
	for _, p := range []struct{ kind, file string }{{"profile", *profile}, {"allocs", *allocProf}} {
		if p.file == "" {
			continue
		}
		done := make(chan error, 1)
		go func() { done <- fetchProfile(ctx, c, p.kind, *profSecs, p.file) }()
		profiles = append(profiles, func() error { return <-done })
	}
	return func() {
		for _, wait := range profiles {
			if err := wait(); err != nil {
				fmt.Println("# profile:", err)
			}
		}
	}
}

// fetchProfile fetches the server's profile of kind (profile: CPU; allocs:
// what was allocated) over secs seconds into file. The generic API server
// serves /debug/pprof to the admin.
func fetchProfile(ctx context.Context, c kubernetes.Interface, kind string, secs int, file string) error {
	data, err := c.CoreV1().RESTClient().Get().AbsPath("/debug/pprof/"+kind).
		Param("seconds", fmt.Sprint(secs)).Timeout(time.Duration(secs)*time.Second + time.Minute).DoRaw(ctx)
	if err != nil {
		return err
	}
	return os.WriteFile(file, data, 0o644)
}
