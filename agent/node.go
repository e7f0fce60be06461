//go:build linux

package agent

import (
	"context"
	"fmt"
	"maps"
	"os"
	goruntime "runtime"
	"strings"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"

	"portal.dev/portal/version"
)

// registerNode creates the Node, or brings an existing one's labels,
// addresses and pod CIDRs (when given and unset) up to date.
func (a *Agent) registerNode(ctx context.Context) (*corev1.Node, error) {
	nodes := a.client.CoreV1().Nodes()
	want := a.initialNode()
	created, err := nodes.Create(ctx, want, metav1.CreateOptions{})
	if err == nil {
		klog.FromContext(ctx).Info("Registered node", "node", a.opts.NodeName)
		return created, nil
	}
	if !apierrors.IsAlreadyExists(err) {
		return nil, fmt.Errorf("register node %s: %w", a.opts.NodeName, err)
	}
	var node *corev1.Node
	err = retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cur, err := nodes.Get(ctx, a.opts.NodeName, metav1.GetOptions{})
		if err != nil {
			return err
		}
		upd := cur.DeepCopy()
		if upd.Labels == nil {
			upd.Labels = map[string]string{}
		}
		maps.Copy(upd.Labels, want.Labels)
		if len(upd.Spec.PodCIDRs) == 0 && len(want.Spec.PodCIDRs) > 0 {
			upd.Spec.PodCIDR, upd.Spec.PodCIDRs = want.Spec.PodCIDR, want.Spec.PodCIDRs
		}
		if equality.Semantic.DeepEqual(cur, upd) {
			node = cur
			return nil
		}
		node, err = nodes.Update(ctx, upd, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("update node %s: %w", a.opts.NodeName, err)
	}
	klog.FromContext(ctx).Info("Node already registered; updated", "node", a.opts.NodeName)
	return node, nil
}

func (a *Agent) initialNode() *corev1.Node {
	labels := map[string]string{
		corev1.LabelHostname:   a.opts.NodeName,
		corev1.LabelOSStable:   goruntime.GOOS,
		corev1.LabelArchStable: goruntime.GOARCH,
	}
	maps.Copy(labels, a.opts.NodeLabels)
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: a.opts.NodeName, Labels: labels}}
	for _, p := range a.opts.PodCIDRs {
		n.Spec.PodCIDRs = append(n.Spec.PodCIDRs, p.String())
	}
	if len(n.Spec.PodCIDRs) > 0 {
		n.Spec.PodCIDR = n.Spec.PodCIDRs[0]
	}
	n.Status = a.nodeStatus(nil, time.Now())
	return n
}

// nodeStatus is the Node's status now, keeping the transition times of
// conditions that did not change from old.
func (a *Agent) nodeStatus(old *corev1.NodeStatus, now time.Time) corev1.NodeStatus {
	capacity := corev1.ResourceList{
		corev1.ResourceCPU:    *resource.NewQuantity(int64(goruntime.NumCPU()), resource.DecimalSI),
		corev1.ResourceMemory: *resource.NewQuantity(memTotal(), resource.BinarySI),
		corev1.ResourcePods:   *resource.NewQuantity(int64(a.opts.MaxPods), resource.DecimalSI),
	}
	var addrs []corev1.NodeAddress
	for _, ip := range a.nodeIPs {
		addrs = append(addrs, corev1.NodeAddress{Type: corev1.NodeInternalIP, Address: ip.String()})
	}
	addrs = append(addrs, corev1.NodeAddress{Type: corev1.NodeHostName, Address: a.opts.NodeName})
	ts := metav1.NewTime(now.Truncate(time.Second))
	ready := corev1.NodeCondition{Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady",
		Message: "portal agent is posting ready status", LastHeartbeatTime: ts, LastTransitionTime: ts}
	conds := []corev1.NodeCondition{
		{Type: corev1.NodeMemoryPressure, Status: corev1.ConditionFalse, Reason: "KubeletHasSufficientMemory", Message: "portal agent does not track memory pressure"},
		{Type: corev1.NodeDiskPressure, Status: corev1.ConditionFalse, Reason: "KubeletHasNoDiskPressure", Message: "portal agent does not track disk pressure"},
		{Type: corev1.NodePIDPressure, Status: corev1.ConditionFalse, Reason: "KubeletHasSufficientPID", Message: "portal agent does not track PID pressure"},
		ready,
	}
	for i := range conds {
		c := &conds[i]
		c.LastHeartbeatTime = ts
		c.LastTransitionTime = ts
		if old == nil {
			continue
		}
		for _, o := range old.Conditions {
			if o.Type == c.Type && o.Status == c.Status {
				c.LastTransitionTime = o.LastTransitionTime
			}
		}
	}
	kernel, osImage := unameRelease(), osRelease()
	return corev1.NodeStatus{
		Capacity:        capacity,
		Allocatable:     capacity,
		Phase:           "",
		Conditions:      conds,
		Addresses:       addrs,
		DaemonEndpoints: corev1.NodeDaemonEndpoints{KubeletEndpoint: corev1.DaemonEndpoint{Port: int32(a.opts.Port)}},
		NodeInfo: corev1.NodeSystemInfo{
			MachineID:               strings.TrimSpace(readFile("/etc/machine-id")),
			BootID:                  strings.TrimSpace(readFile("/proc/sys/kernel/random/boot_id")),
			KernelVersion:           kernel,
			OSImage:                 osImage,
			ContainerRuntimeVersion: "portal://" + version.Version,
			KubeletVersion:          version.KubernetesGitVersion(),
			OperatingSystem:         goruntime.GOOS,
			Architecture:            goruntime.GOARCH,
		},
	}
}

// statusChanged says whether the node status differs from old beyond the
// heartbeat times.
func statusChanged(old, cur corev1.NodeStatus) bool {
	strip := func(s corev1.NodeStatus) corev1.NodeStatus {
		s = *s.DeepCopy()
		for i := range s.Conditions {
			s.Conditions[i].LastHeartbeatTime = metav1.Time{}
		}
		s.Images, s.VolumesInUse, s.VolumesAttached = nil, nil, nil
		return s
	}
	return !equality.Semantic.DeepEqual(strip(old), strip(cur))
}

// syncNodeStatus writes the node status when it changed, or its heartbeat
// when the last report is older than StatusReportFrequency.
func (a *Agent) syncNodeStatus(ctx context.Context, force bool) error {
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		node, err := a.client.CoreV1().Nodes().Get(ctx, a.opts.NodeName, metav1.GetOptions{ResourceVersion: "0"})
		if err != nil {
			return err
		}
		now := time.Now()
		st := a.nodeStatus(&node.Status, now)
		if !force && !statusChanged(node.Status, st) && now.Sub(a.lastReport) < a.opts.StatusReportFrequency {
			return nil
		}
		upd := node.DeepCopy()
		upd.Status = st
		if _, err := a.client.CoreV1().Nodes().UpdateStatus(ctx, upd, metav1.UpdateOptions{}); err != nil {
			if apierrors.IsConflict(err) {
				// The cached read was stale; read the latest.
				node, err = a.client.CoreV1().Nodes().Get(ctx, a.opts.NodeName, metav1.GetOptions{})
				if err != nil {
					return err
				}
				upd = node.DeepCopy()
				upd.Status = a.nodeStatus(&node.Status, now)
				_, err = a.client.CoreV1().Nodes().UpdateStatus(ctx, upd, metav1.UpdateOptions{})
			}
			if err != nil {
				return err
			}
		}
		a.lastReport = now
		return nil
	})
}

// renewLease creates or renews the node's Lease in kube-node-lease.
func (a *Agent) renewLease(ctx context.Context, node *corev1.Node) error {
	leases := a.client.CoordinationV1().Leases(corev1.NamespaceNodeLease)
	now := metav1.NewMicroTime(time.Now())
	if a.lease != nil {
		l := a.lease.DeepCopy()
		l.Spec.RenewTime = &now
		upd, err := leases.Update(ctx, l, metav1.UpdateOptions{})
		if err == nil {
			a.lease = upd
			return nil
		}
		if !apierrors.IsConflict(err) && !apierrors.IsNotFound(err) {
			return err
		}
		a.lease = nil
	}
	cur, err := leases.Get(ctx, a.opts.NodeName, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		l := &coordinationv1.Lease{
			ObjectMeta: metav1.ObjectMeta{Name: a.opts.NodeName, Namespace: corev1.NamespaceNodeLease},
			Spec: coordinationv1.LeaseSpec{
				HolderIdentity:       ptr.To(a.opts.NodeName),
				LeaseDurationSeconds: ptr.To(int32(a.opts.LeaseDuration / time.Second)),
				RenewTime:            &now,
			},
		}
		if node != nil {
			l.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "Node", Name: node.Name, UID: node.UID}}
		}
		a.lease, err = leases.Create(ctx, l, metav1.CreateOptions{})
		return err
	case err != nil:
		return err
	}
	l := cur.DeepCopy()
	l.Spec.HolderIdentity = ptr.To(a.opts.NodeName)
	l.Spec.LeaseDurationSeconds = ptr.To(int32(a.opts.LeaseDuration / time.Second))
	l.Spec.RenewTime = &now
	a.lease, err = leases.Update(ctx, l, metav1.UpdateOptions{})
	return err
}

// heartbeat renews the Lease every quarter of its duration and checks the
// node status every 10 seconds, until ctx ends.
func (a *Agent) heartbeat(ctx context.Context, node *corev1.Node) {
	renew := a.opts.LeaseDuration / 4
	leaseT := time.NewTicker(renew)
	statusT := time.NewTicker(10 * time.Second)
	defer leaseT.Stop()
	defer statusT.Stop()
	logger := klog.FromContext(ctx)
	for {
		select {
		case <-ctx.Done():
			return
		case <-leaseT.C:
			if err := a.renewLease(ctx, node); err != nil && ctx.Err() == nil {
				logger.Error(err, "Renew node lease", "node", a.opts.NodeName)
			}
		case <-statusT.C:
			if err := a.syncNodeStatus(ctx, false); err != nil && ctx.Err() == nil {
				logger.Error(err, "Update node status", "node", a.opts.NodeName)
			}
		}
	}
}

func memTotal() int64 {
	for _, line := range strings.Split(readFile("/proc/meminfo"), "\n") {
		if rest, ok := strings.CutPrefix(line, "MemTotal:"); ok {
			var kb int64
			fmt.Sscan(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), &kb)
			return kb * 1024
		}
	}
	return 0
}

func unameRelease() string { return strings.TrimSpace(readFile("/proc/sys/kernel/osrelease")) }

func osRelease() string {
	for _, line := range strings.Split(readFile("/etc/os-release"), "\n") {
		if v, ok := strings.CutPrefix(line, "PRETTY_NAME="); ok {
			return strings.Trim(v, `"`)
		}
	}
	return goruntime.GOOS
}

func readFile(p string) string {
	b, _ := os.ReadFile(p)
	return string(b)
}

// hostIPs are the node's addresses as strings, for pod status.
func (a *Agent) hostIPs() []string {
	out := make([]string, len(a.nodeIPs))
	for i, ip := range a.nodeIPs {
		out[i] = ip.String()
	}
	return out
}
