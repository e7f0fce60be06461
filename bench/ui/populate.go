package main

import (
	"context"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"portal.dev/portal/bench/internal/cluster"
)

// populate fills the cluster (see cluster.Fill) and returns a token of a
// cluster-admin service account for the page.
func populate(ctx context.Context, cfg *rest.Config) (string, error) {
	pcfg := rest.CopyConfig(cfg)
	pcfg.ContentType = runtime.ContentTypeProtobuf
	c, err := kubernetes.NewForConfig(pcfg)
	if err != nil {
		return "", err
	}
	size := cluster.Size{Services: *services, PodsPerService: *podsPer, Nodes: *nodes}
	if err := cluster.Fill(ctx, c, size); err != nil {
		return "", err
	}
	return adminToken(ctx, c)
}

// adminToken binds a service account to cluster-admin and asks a token for it.
func adminToken(ctx context.Context, c kubernetes.Interface) (string, error) {
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "viewer"}}
	if _, err := c.CoreV1().ServiceAccounts(cluster.Namespace).Create(ctx, sa, metav1.CreateOptions{}); err != nil {
		return "", err
	}
	crb := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "bench-ui"},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "cluster-admin"},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: "viewer", Namespace: cluster.Namespace}}}
	if _, err := c.RbacV1().ClusterRoleBindings().Create(ctx, crb, metav1.CreateOptions{}); err != nil {
		return "", err
	}
	tr, err := c.CoreV1().ServiceAccounts(cluster.Namespace).CreateToken(ctx, "viewer", &authenticationv1.TokenRequest{}, metav1.CreateOptions{})
	if err != nil {
		return "", err
	}
	return tr.Status.Token, nil
}
