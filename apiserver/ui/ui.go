// Package ui serves the service map at /ui/ on the API server's port: the
// page and its script, embedded in the binary, an endpoint that says who
// the caller is, one that lists the large kinds in the slim form the map
// draws, two that judge Services with package explain, and one that sums
// the node proxies' traffic counters.
//
// The page holds no data. Anonymous clients get it as the login page (it
// asks for a token) and nothing else: every object the map shows comes
// from the page's own authenticated requests, made with the user's
// credentials. The small kinds it lists from the API; Pods, EndpointSlices
// and Services it lists through /ui/api/list, from the server's caches,
// because fetching and decoding ten thousand whole Pods is most of a
// page load, and the map needs a few fields of each. Every kind it then
// watches through the API.
//
// The page asks nothing of the API before it has a user: the API answers
// every anonymous HTTP/2 request with "Connection: close" (kube-apiserver's
// UnauthenticatedHTTP2DOSMitigation), which makes the server send GOAWAY
// and close the connection, and a browser that has just handed its next
// request (a navigation, a fetch) to that connection fails it with
// ERR_CONNECTION_CLOSED instead of retrying. So the login page learns
// whether the caller is logged in from /ui/api/whoami, and names its own
// icon so that the browser does not ask the API for /favicon.ico. Like the
// page itself, the UI's answers to anonymous callers leave the connection
// open: they are small and fixed, and closing under them would bring the
// failure back.
//
// The endpoints here run as the caller:
// /ui/api/list and /ui/api/status check with the authorizer that the
// caller may list each kind they read from the caches, and
// /ui/api/explain impersonates the caller, so no user sees through the UI
// what the API would refuse them. /ui/api/traffic asks each node's agent
// for its proxy's counters through the API server's nodes/NAME/proxy as
// the caller, and keeps only the Services of namespaces the caller may
// list. This package must not grant anything
// the API does not.
//
// Request and error rates come from those counters: new connections and
// connections refused for want of endpoints, per Service, where a node's
// proxy counts them (the nftables mode), and requests and 5xx answers per
// backend Service where a node's Ingress controller serves them. Where nothing counts, the map
// shows no rate: a blank is better than a made-up zero.
package ui

import (
	"embed"
	"encoding/json"
	"io/fs"
	"net/http"
	"strings"

	"k8s.io/apiserver/pkg/authentication/authenticator"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

//go:embed assets
var assets embed.FS

// Prefix is the path the UI is served under.
const Prefix = "/ui/"

// Config is what the UI needs from the API server it is part of.
type Config struct {
	// Authenticator identifies the caller of the endpoints, as the API's
	// own chain does (bearer token or client certificate).
	Authenticator authenticator.Request
	// Authorizer decides what the caller may read through /ui/api/status.
	Authorizer authorizer.Authorizer
	// Loopback reaches the API as the server; the UI uses it for its
	// caches and, impersonating the caller, for explain.
	Loopback *rest.Config
	// ClusterDomain is the DNS zone explain asks names in (default
	// cluster.local).
	ClusterDomain string
	// Stop ends the caches once the server shuts down.
	Stop <-chan struct{}
}

// UI is the /ui/ handler of one API server.
type UI struct {
	cfg    Config
	static http.Handler
	caches *caches
	// askTraffic, if set, replaces asking the nodes through the API
	// (tests).
	askTraffic trafficAsker
}

// New returns the UI for cfg.
func New(cfg Config) *UI {
	sub, err := fs.Sub(assets, "assets")
	if err != nil {
		panic(err) // the embedded tree is fixed at build time
	}
	loopback := func() (kubernetes.Interface, error) { return kubernetes.NewForConfig(cfg.Loopback) }
	return &UI{cfg: cfg, static: http.StripPrefix(Prefix, http.FileServer(http.FS(sub))), caches: newCaches(loopback, cfg.Stop)}
}

// Wrap returns a handler that answers /ui and everything below it and
// passes every other request to next (the API's handler chain).
func (u *UI) Wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch p := r.URL.Path; {
		case p == "/ui":
			http.Redirect(w, r, Prefix, http.StatusMovedPermanently)
		case p == Prefix+"api/whoami":
			u.withUser(w, r, serveWhoAmI)
		case p == Prefix+"api/status":
			u.withUser(w, r, u.serveStatus)
		case p == Prefix+"api/list":
			u.withUser(w, r, u.serveList)
		case p == Prefix+"api/explain":
			u.withUser(w, r, u.serveExplain)
		case p == Prefix+"api/traffic":
			u.withUser(w, r, u.serveTraffic)
		case strings.HasPrefix(p, Prefix+"api/"):
			writeError(w, http.StatusNotFound, "no such UI endpoint")
		case strings.HasPrefix(p, Prefix):
			if r.Method != http.MethodGet && r.Method != http.MethodHead {
				writeError(w, http.StatusMethodNotAllowed, "the UI's pages are read-only")
				return
			}
			w.Header().Set("Cache-Control", "no-cache")
			w.Header().Set("X-Content-Type-Options", "nosniff")
			// The page runs no script but its own and loads nothing from
			// elsewhere, so it works offline and injected markup cannot run.
			w.Header().Set("Content-Security-Policy", "default-src 'self'; img-src 'self' data:; frame-ancestors 'none'")
			u.static.ServeHTTP(w, r)
		default:
			next.ServeHTTP(w, r)
		}
	})
}

// withUser authenticates r as the API would and calls serve with the
// user, or answers 401: the endpoints have nothing for anonymous callers.
func (u *UI) withUser(w http.ResponseWriter, r *http.Request, serve func(http.ResponseWriter, *http.Request, user.Info)) {
	if r.Method != http.MethodGet {
		writeError(w, http.StatusMethodNotAllowed, "only GET")
		return
	}
	resp, ok, err := u.cfg.Authenticator.AuthenticateRequest(r)
	if err != nil || !ok || resp.User.GetName() == user.Anonymous {
		writeError(w, http.StatusUnauthorized, "Unauthorized: log in with a bearer token or a client certificate")
		return
	}
	serve(w, r, resp.User)
}

// whoAmI is what /ui/api/whoami answers a user who is logged in.
type whoAmI struct {
	Username string `json:"username"`
}

// serveWhoAmI tells the page who the caller is; its 401 tells it to ask
// for a token. The page asks here rather than the API because the API
// closes an HTTP/2 connection after every anonymous request (see the
// package doc), and a browser's next request can land on it as it closes.
func serveWhoAmI(w http.ResponseWriter, _ *http.Request, u user.Info) {
	writeJSON(w, http.StatusOK, whoAmI{Username: u.GetName()})
}

// errorBody is the JSON of every error the endpoints answer.
type errorBody struct {
	Message string `json:"message"`
}

func writeError(w http.ResponseWriter, code int, msg string) {
	writeJSON(w, code, errorBody{Message: msg})
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(code)
	json.NewEncoder(w).Encode(v)
}
