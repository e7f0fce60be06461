package route

import (
	"fmt"
	"strconv"
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

// DefaultOptions are the settings of an Ingress without portal.dev/
// annotations: redirect to HTTPS on, the server's default timeouts.
var DefaultOptions = Options{SSLRedirect: true}

// parseOptions reads an Ingress's portal.dev/ annotations. A malformed
// value is reported and its default kept, so one typo does not take the
// Ingress down.
func parseOptions(ing *networkingv1.Ingress, problem func(reason, msg string)) *Options {
	a := ing.Annotations
	_, r := a[AnnotationSSLRedirect]
	_, c := a[AnnotationConnectTimeout]
	_, rd := a[AnnotationReadTimeout]
	_, s := a[AnnotationSendTimeout]
	if !r && !c && !rd && !s {
		return &DefaultOptions
	}
	o := DefaultOptions
	if v, ok := a[AnnotationSSLRedirect]; ok {
		b, err := strconv.ParseBool(v)
		if err != nil {
			problem("InvalidAnnotation", fmt.Sprintf("annotation %s: %q is not true or false; using the default (true)", AnnotationSSLRedirect, v))
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
		v, ok := a[d.name]
		if !ok {
			continue
		}
		t, err := parseTimeout(v)
		if err != nil {
			problem("InvalidAnnotation", fmt.Sprintf("annotation %s: %v; using the default", d.name, err))
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
