package ingress

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"k8s.io/klog/v2"
)

// The status Lease's timings are ingress-nginx's: only the leader writes
// Ingress status, and a few seconds without one cost nothing but a late
// address.
const (
	statusLeaseNamespace = "kube-system"
	statusLeaseDuration  = 30 * time.Second
	statusRenewDeadline  = 15 * time.Second
	statusRetryPeriod    = 5 * time.Second
)

// electionID is the name of the Lease the replicas serving one class
// campaign for: --election-id, else one per class.
func (o Options) electionID() string {
	if o.ElectionID != "" {
		return o.ElectionID
	}
	return "portal-ingress-leader-" + o.IngressClass
}

// electionIdentity names this replica in the Lease. It stays the same
// across restarts, so a controller that was killed while leading takes the
// Lease back at once instead of waiting for it to expire, and it differs
// between replicas: two controllers on one node cannot share both ports.
func (o Options) electionIdentity() string {
	return fmt.Sprintf("%s_%s_%d_%d", o.NodeName, o.BindAddress, o.HTTPPort, o.HTTPSPort)
}

// whileLeading runs work while this replica holds the status Lease, as
// ingress-nginx elects one replica to write Ingress status: several
// controllers publishing different addresses (each its own node's) would
// otherwise overwrite each other forever. A lost Lease cancels work's
// context and the replica campaigns again, until ctx ends. When work ends
// on its own (its writer failed), the replica releases the Lease and waits
// a lease duration before campaigning again, so that another replica writes
// status instead of this one holding the Lease while writing nothing.
func (c *Controller) whileLeading(ctx context.Context, work func(context.Context) error) error {
	lock := &resourcelock.LeaseLock{
		LeaseMeta:  leaseMeta(c.opts.electionID()),
		Client:     c.client.CoordinationV1(),
		LockConfig: resourcelock.ResourceLockConfig{Identity: c.opts.electionIdentity()},
	}
	for ctx.Err() == nil {
		campaign, stepDown := context.WithCancel(ctx)
		var failed atomic.Bool
		le, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
			Lock:            lock,
			LeaseDuration:   statusLeaseDuration,
			RenewDeadline:   statusRenewDeadline,
			RetryPeriod:     statusRetryPeriod,
			ReleaseOnCancel: true,
			Name:            c.opts.electionID(),
			Callbacks: leaderelection.LeaderCallbacks{
				OnStartedLeading: func(lctx context.Context) {
					klog.InfoS("Leading; writing Ingress status", "lease", c.opts.electionID(), "identity", lock.Identity())
					err := work(lctx)
					if lctx.Err() != nil {
						return
					}
					klog.ErrorS(err, "Ingress status updater stopped; releasing the Lease", "lease", c.opts.electionID())
					failed.Store(true)
					stepDown()
				},
				OnStoppedLeading: func() {
					klog.InfoS("Stopped leading; another replica writes Ingress status", "lease", c.opts.electionID())
				},
			},
		})
		if err != nil {
			stepDown()
			return err
		}
		le.Run(campaign)
		stepDown()
		if failed.Load() {
			select {
			case <-ctx.Done():
			case <-time.After(statusLeaseDuration):
			}
		}
	}
	return nil
}

func leaseMeta(name string) metav1.ObjectMeta {
	return metav1.ObjectMeta{Namespace: statusLeaseNamespace, Name: name}
}
