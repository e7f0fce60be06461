package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"portal.dev/portal/bench/internal/host"
)

// benchUser is the ordinary user of the authorization run. The admin
// credential is in system:masters, which Portal allows before asking any
// authorization mode, so it would measure no mode at all.
const benchUser = "bench"

// authorization measures Service creates by benchUser, bound a role that
// lets it create Services, on a server with --authorization-mode
// AlwaysAllow, then Node,RBAC, then AlwaysAllow again (A/B/A, each on a
// fresh server), and prints the ratio of RBAC to the anchors' mean.
func authorization(ctx context.Context, portal, core string, d time.Duration, c int) error {
	var runs []result
	for i, mode := range []string{"AlwaysAllow", "Node,RBAC", "AlwaysAllow"} {
		r, err := authorizedCreates(ctx, portal, core, mode, d, c, i)
		if err != nil {
			return fmt.Errorf("--authorization-mode %s: %w", mode, err)
		}
		r.print("service-create-as-user authorization-mode="+mode, c)
		runs = append(runs, r)
	}
	anchor := (runs[0].rate + runs[2].rate) / 2
	anchorCPU := (runs[0].cpuPerOp + runs[2].cpuPerOp).Seconds() / 2
	fmt.Printf("RESULT ratio service-create Node,RBAC/AlwaysAllow c=%d %.3f server_cpu_per_op %.3f\n",
		c, runs[1].rate/anchor, runs[1].cpuPerOp.Seconds()/anchorCPU)
	return nil
}

// authorizedCreates starts a server with mode, lets benchUser create
// Services and measures its creates.
func authorizedCreates(ctx context.Context, portal, core, mode string, d time.Duration, c, round int) (result, error) {
	dir, srv, admin, err := start(portal, core, "--authorization-mode", mode)
	if err != nil {
		return result{}, err
	}
	defer os.RemoveAll(dir)
	defer srv.stop()
	user, err := userClient(ctx, portal, dir, admin)
	if err != nil {
		return result{}, err
	}
	// A new binding reaches the authorizer's cache a moment after it is
	// written: wait until the user may create.
	for i := 0; ; i++ {
		_, err := user.CoreV1().Services("default").Create(ctx, service("authz-probe"), metav1.CreateOptions{})
		if err == nil {
			break
		}
		if i == 100 {
			return result{}, fmt.Errorf("user cannot create Services: %w", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	cpu0 := host.CPU(srv.cmd.Process.Pid)
	r := measure(d, c, serviceCreate(user, fmt.Sprintf("authz%d", round)))
	if r.n > 0 {
		r.cpuPerOp = (host.CPU(srv.cmd.Process.Pid) - cpu0) / time.Duration(r.n)
	}
	return r, nil
}

// userClient binds benchUser a ClusterRole that creates Services and
// returns a client with its own certificate, minted by portal kubeconfig.
func userClient(ctx context.Context, portal, dir string, admin kubernetes.Interface) (kubernetes.Interface, error) {
	role := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "bench-services"},
		Rules: []rbacv1.PolicyRule{{Verbs: []string{"create"}, APIGroups: []string{""}, Resources: []string{"services"}}}}
	if _, err := admin.RbacV1().ClusterRoles().Create(ctx, role, metav1.CreateOptions{}); err != nil {
		return nil, err
	}
	binding := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "bench-services"},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role.Name},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: benchUser}}}
	if _, err := admin.RbacV1().ClusterRoleBindings().Create(ctx, binding, metav1.CreateOptions{}); err != nil {
		return nil, err
	}
	kc := filepath.Join(dir, "bench.kubeconfig")
	if out, err := exec.Command(portal, "kubeconfig", "--data-dir", dir, "--user", benchUser,
		"--server", "https://127.0.0.1:16999", "-o", kc).CombinedOutput(); err != nil {
		return nil, fmt.Errorf("portal kubeconfig: %v: %s", err, out)
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", kc)
	if err != nil {
		return nil, err
	}
	cfg.QPS, cfg.Burst = 1e6, 1e6
	cfg.ContentType = runtime.ContentTypeProtobuf
	cfg.AcceptContentTypes = runtime.ContentTypeProtobuf + "," + runtime.ContentTypeJSON
	return kubernetes.NewForConfig(cfg)
}
