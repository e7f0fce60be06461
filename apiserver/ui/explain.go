package ui

import (
	"context"
	"fmt"
	"net/http"
	"strings"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/client-go/rest"

	"portal.dev/portal/explain"
)

// serveExplain answers GET /ui/api/explain?namespace=NS&target=svc/NAME
// with the explain report, diagnosed through a client that impersonates
// the caller: every object the diagnosis reads is authorized as theirs.
func (u *UI) serveExplain(w http.ResponseWriter, r *http.Request, who user.Info) {
	ns, target := r.URL.Query().Get("namespace"), r.URL.Query().Get("target")
	if target == "" {
		writeError(w, http.StatusBadRequest, "target is required (svc/NAME, pod/NAME, ingress/NAME, IP:PORT or HOST)")
		return
	}
	run := u.cfg.Explain
	if run == nil {
		run = checkOnly
	}
	report, err := run(r.Context(), impersonating(u.cfg.Loopback, who), ns, target)
	if err != nil {
		code := http.StatusBadGateway
		if apierrors.IsForbidden(err) {
			code = http.StatusForbidden
		} else if apierrors.IsNotFound(err) {
			code = http.StatusNotFound
		}
		writeError(w, code, fmt.Sprintf("explain %s: %v", target, err))
		return
	}
	writeJSON(w, http.StatusOK, report)
}

// impersonating returns a copy of the server's loopback config that acts
// as who, so that the API authorizes each request as who's own.
func impersonating(loopback *rest.Config, who user.Info) *rest.Config {
	cfg := rest.CopyConfig(loopback)
	cfg.Impersonate = rest.ImpersonationConfig{
		UserName: who.GetName(),
		UID:      who.GetUID(),
		Groups:   who.GetGroups(),
		Extra:    who.GetExtra(),
	}
	return cfg
}

// checkOnly is the diagnosis of a Service from CheckService alone, for a
// server built without the live Explainer: it reads the namespace's
// objects through cfg (so as the caller), and says what it may not read.
func checkOnly(ctx context.Context, cfg *rest.Config, ns, target string) (*explain.Report, error) {
	name, ok := strings.CutPrefix(target, "svc/")
	if !ok {
		return nil, fmt.Errorf("only svc/NAME can be diagnosed here")
	}
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	svc, err := client.CoreV1().Services(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	var objs explain.Objects
	var unread []explain.Step
	note := func(what string, err error) {
		unread = append(unread, explain.Step{Name: what, Status: explain.StatusWarning, Message: fmt.Sprintf("not checked: %v", err)})
	}
	if l, err := client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{}); err == nil {
		objs.Pods = pointers(l.Items)
	} else {
		note("pods", err)
	}
	sel := metav1.ListOptions{LabelSelector: discoveryv1.LabelServiceName + "=" + name}
	if l, err := client.DiscoveryV1().EndpointSlices(ns).List(ctx, sel); err == nil {
		objs.Slices = pointers(l.Items)
	} else {
		note("endpointslices", err)
	}
	if l, err := client.CoreV1().Nodes().List(ctx, metav1.ListOptions{}); err == nil {
		objs.Nodes = pointers(l.Items)
	} else {
		note("nodes", err)
	}
	if l, err := client.NetworkingV1().Ingresses(ns).List(ctx, metav1.ListOptions{}); err == nil {
		objs.Ingresses = pointers(l.Items)
	} else {
		note("ingresses", err)
	}
	objs.Services = []*corev1.Service{svc}
	steps := append(explain.CheckService(svc, objs), unread...)
	return &explain.Report{Target: "svc/" + ns + "/" + name, Status: explain.Worst(steps), Steps: steps}, nil
}

func pointers[T any](items []T) []*T {
	out := make([]*T, len(items))
	for i := range items {
		out[i] = &items[i]
	}
	return out
}
