package probe

import (
	"context"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// Worker probes one container instance with one probe until its context
// ends, or until a liveness or startup probe reaches its verdict (the
// container is then restarted or started; the next instance gets a new
// worker).
type Worker struct {
	Kind   Kind
	Probe  *corev1.Probe
	Target Target
	// StartedAt is when the container instance started; initialDelaySeconds
	// counts from it.
	StartedAt time.Time
	// From is the result to start from; Unknown means Initial(Kind). A
	// re-adopted container starts from the result it had.
	From Result
	// Gate, when set, holds probing until it returns true: readiness and
	// liveness wait for the startup probe.
	Gate func() bool
	// OnResult is called with each change of the thresholded result, and
	// message says why a failure failed.
	OnResult func(r Result, message string)
	// OnFailure, when set, is called with the message of every failed
	// run, thresholded or not: a pod that never became ready changes no
	// result, yet users need to see why its probe fails.
	OnFailure func(message string)
}

// Run probes every periodSeconds and returns when ctx ends or the verdict
// is final.
func (w *Worker) Run(ctx context.Context) {
	p := w.Probe
	period := time.Duration(max(p.PeriodSeconds, 1)) * time.Second
	timeout := time.Duration(max(p.TimeoutSeconds, 1)) * time.Second
	counter := Counter{SuccessThreshold: p.SuccessThreshold, FailureThreshold: p.FailureThreshold, Current: Initial(w.Kind)}
	if w.From != Unknown {
		counter.Current = w.From
	}
	if w.Kind != Readiness {
		// Liveness and startup need a single success (the API enforces it).
		counter.SuccessThreshold = 1
	}
	delay := time.Until(w.StartedAt.Add(time.Duration(p.InitialDelaySeconds) * time.Second))
	if delay > 0 {
		if !sleep(ctx, delay) {
			return
		}
	}
	for {
		if w.Gate == nil || w.Gate() {
			r, msg := Run(ctx, p.ProbeHandler, timeout, w.Target)
			if ctx.Err() != nil {
				return
			}
			if r == Failure && w.OnFailure != nil {
				w.OnFailure(msg)
			}
			if got, changed := counter.Observe(r); changed {
				w.OnResult(got, msg)
			}
			switch {
			case w.Kind == Startup && counter.Current == Success:
				return
			case w.Kind != Readiness && counter.Current == Failure:
				return
			}
		}
		if !sleep(ctx, period) {
			return
		}
	}
}

func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}
