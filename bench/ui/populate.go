package main

import (
	"context"
	"fmt"
	"sync"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// populate creates the nodes, the Services and their ready Pods, waits for
// their endpoints, and returns a token of a cluster-admin service account
// for the page.
func populate(ctx context.Context, cfg *rest.Config) (string, error) {
	pcfg := rest.CopyConfig(cfg)
	pcfg.ContentType = runtime.ContentTypeProtobuf
	c, err := kubernetes.NewForConfig(pcfg)
	if err != nil {
		return "", err
	}
	if _, err := c.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "bench"}}, metav1.CreateOptions{}); err != nil {
		return "", err
	}
	for i := range *nodes {
		if err := createNode(ctx, c, fmt.Sprintf("n%d", i)); err != nil {
			return "", err
		}
	}
	if err := parallel(*services, func(i int) error { return createService(ctx, c, i) }); err != nil {
		return "", err
	}
	if err := waitEndpoints(ctx, c, *services**podsPer); err != nil {
		return "", err
	}
	return adminToken(ctx, c)
}

func createNode(ctx context.Context, c kubernetes.Interface, name string) error {
	if _, err := c.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil {
		return err
	}
	// A patch, not an update: the node controllers write the new node too.
	now := time.Now().UTC().Format(time.RFC3339)
	patch := fmt.Sprintf(`{"status":{"conditions":[{"type":"Ready","status":"True","reason":"Bench","lastHeartbeatTime":%q,"lastTransitionTime":%q}]}}`, now, now)
	_, err := c.CoreV1().Nodes().Patch(ctx, name, types.StrategicMergePatchType, []byte(patch), metav1.PatchOptions{}, "status")
	return err
}

// parallel runs do(0..n-1) on 32 workers and returns the first error.
func parallel(n int, do func(int) error) error {
	work := make(chan int)
	errs := make(chan error, 1)
	var wg sync.WaitGroup
	for range 32 {
		wg.Go(func() {
			for i := range work {
				if err := do(i); err != nil {
					select {
					case errs <- err:
					default:
					}
				}
			}
		})
	}
	for i := range n {
		work <- i
	}
	close(work)
	wg.Wait()
	select {
	case err := <-errs:
		return err
	default:
		return nil
	}
}

func createService(ctx context.Context, c kubernetes.Interface, i int) error {
	name := fmt.Sprintf("s%d", i)
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: corev1.ServiceSpec{Selector: map[string]string{"app": name},
			Ports: []corev1.ServicePort{{Name: "http", Port: 80, Protocol: corev1.ProtocolTCP}}}}
	if _, err := c.CoreV1().Services("bench").Create(ctx, svc, metav1.CreateOptions{}); err != nil {
		return err
	}
	for j := range *podsPer {
		n := i**podsPer + j
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("%s-%d", name, j), Labels: map[string]string{"app": name}},
			Spec: corev1.PodSpec{NodeName: fmt.Sprintf("n%d", n%*nodes),
				Containers: []corev1.Container{{Name: "c", Image: "none", Command: []string{"sleep"}}}}}
		p, err := c.CoreV1().Pods("bench").Create(ctx, pod, metav1.CreateOptions{})
		if err != nil {
			return err
		}
		ip := fmt.Sprintf("10.%d.%d.%d", 128+n>>16, n>>8&255, n&255)
		p.Status = corev1.PodStatus{Phase: corev1.PodRunning, PodIP: ip, PodIPs: []corev1.PodIP{{IP: ip}},
			Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}}
		if _, err := c.CoreV1().Pods("bench").UpdateStatus(ctx, p, metav1.UpdateOptions{}); err != nil {
			return err
		}
	}
	return nil
}

// waitEndpoints waits until the namespace's slices hold want ready endpoints.
func waitEndpoints(ctx context.Context, c kubernetes.Interface, want int) error {
	deadline := time.Now().Add(5 * time.Minute)
	got := 0
	for time.Now().Before(deadline) {
		l, err := c.DiscoveryV1().EndpointSlices("bench").List(ctx, metav1.ListOptions{})
		if err != nil {
			return err
		}
		got = 0
		for _, s := range l.Items {
			for _, e := range s.Endpoints {
				if e.Conditions.Ready == nil || *e.Conditions.Ready {
					got++
				}
			}
		}
		if got >= want {
			return nil
		}
		time.Sleep(time.Second)
	}
	return fmt.Errorf("endpoints: %d ready, want %d", got, want)
}

// adminToken binds a service account to cluster-admin and asks a token for it.
func adminToken(ctx context.Context, c kubernetes.Interface) (string, error) {
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "viewer"}}
	if _, err := c.CoreV1().ServiceAccounts("bench").Create(ctx, sa, metav1.CreateOptions{}); err != nil {
		return "", err
	}
	crb := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "bench-ui"},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "cluster-admin"},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: "viewer", Namespace: "bench"}}}
	if _, err := c.RbacV1().ClusterRoleBindings().Create(ctx, crb, metav1.CreateOptions{}); err != nil {
		return "", err
	}
	tr, err := c.CoreV1().ServiceAccounts("bench").CreateToken(ctx, "viewer", &authenticationv1.TokenRequest{}, metav1.CreateOptions{})
	if err != nil {
		return "", err
	}
	return tr.Status.Token, nil
}
