package ui

import (
	"fmt"
	"net/http"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
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
	client, err := kubernetes.NewForConfig(impersonating(u.cfg.Loopback, who))
	if err != nil {
		writeError(w, http.StatusInternalServerError, err.Error())
		return
	}
	ex := explain.New(explain.Config{Client: client, ClusterDomain: u.cfg.ClusterDomain})
	report, err := ex.Explain(r.Context(), ns, target)
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
