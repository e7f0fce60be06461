package route

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	networkingv1 "k8s.io/api/networking/v1"
)

// The portal.dev/ annotations an Ingress may carry.
const (
	AnnotationSSLRedirect    = "portal.dev/ssl-redirect"
	AnnotationConnectTimeout = "portal.dev/proxy-connect-timeout"
	AnnotationReadTimeout    = "portal.dev/proxy-read-timeout"
	AnnotationSendTimeout    = "portal.dev/proxy-send-timeout"
)

// NginxAnnotationPrefix is ingress-nginx's annotation prefix. Each of
// Portal's annotations above is honoured under it too
// (nginx.ingress.kubernetes.io/ssl-redirect and so on), with the same
// meaning and values, so that an Ingress written for ingress-nginx keeps
// these settings; Portal's own wins when an Ingress has both.
const NginxAnnotationPrefix = "nginx.ingress.kubernetes.io/"

// DefaultOptions are the settings of an Ingress without portal.dev/
// annotations: redirect to HTTPS on, the server's default timeouts.
var DefaultOptions = Options{SSLRedirect: true}

// annotation returns the value of one of Portal's annotations on an
// Ingress, else of ingress-nginx's of the same name, and the key it was
// found under.
func annotation(a map[string]string, name string) (value, key string, ok bool) {
	if v, ok := a[name]; ok {
		return v, name, true
	}
	key = NginxAnnotationPrefix + strings.TrimPrefix(name, "portal.dev/")
	value, ok = a[key]
	return value, key, ok
}

// parseOptions reads an Ingress's portal.dev/ annotations (or
// ingress-nginx's). A malformed value is reported and its default kept,
// so one typo does not take the Ingress down.
func parseOptions(ing *networkingv1.Ingress, problem func(reason, msg string)) *Options {
	a := ing.Annotations
	found := false
	for _, name := range []string{AnnotationSSLRedirect, AnnotationConnectTimeout, AnnotationReadTimeout, AnnotationSendTimeout} {
		_, _, ok := annotation(a, name)
		found = found || ok
	}
	if !found {
		return &DefaultOptions
	}
	o := DefaultOptions
	if v, key, ok := annotation(a, AnnotationSSLRedirect); ok {
		b, err := strconv.ParseBool(v)
		if err != nil {
			problem("InvalidAnnotation", fmt.Sprintf("annotation %s: %q is not true or false; using the default (true)", key, v))
		} else {
			o.SSLRedirect = b
		}
	}
	for _, d := range []struct {
		name string
		into *time.Duration
	}{
		{AnnotationConnectTimeout, &o.ConnectTimeout},
		{AnnotationReadTimeout, &o.ReadTimeout},
		{AnnotationSendTimeout, &o.SendTimeout},
	} {
		v, key, ok := annotation(a, d.name)
		if !ok {
			continue
		}
		t, err := parseTimeout(v)
		if err != nil {
			problem("InvalidAnnotation", fmt.Sprintf("annotation %s: %v; using the default", key, err))
			continue
		}
		*d.into = t
	}
	return &o
}

// parseTimeout reads a timeout as ingress-nginx does (a number of seconds)
// or as a Go duration ("1m30s").
func parseTimeout(v string) (time.Duration, error) {
	if n, err := strconv.ParseFloat(v, 64); err == nil {
		if !(n > 0 && n <= 1e9) { // also rejects NaN
			return 0, fmt.Errorf("%q is not a positive number of seconds", v)
		}
		return time.Duration(n * float64(time.Second)), nil
	}
	d, err := time.ParseDuration(v)
	if err != nil || d <= 0 {
		return 0, fmt.Errorf("%q is neither a positive duration nor a number of seconds", v)
	}
	return d, nil
}
