package scheme

import (
	"fmt"
	"net/url"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/conversion"
	"k8s.io/apimachinery/pkg/runtime"
)

// addParameterConversions teaches the scheme to read option kinds from a
// query string: PodLogOptions for pods/log. Upstream generates these; the
// rules are the same (last value wins, booleans and integers parsed
// strictly, a bad value is an error naming the parameter).
func addParameterConversions(s *runtime.Scheme) error {
	if err := addStreamParameterConversions(s); err != nil {
		return err
	}
	return s.AddConversionFunc((*url.Values)(nil), (*corev1.PodLogOptions)(nil), func(a, b any, _ conversion.Scope) error {
		return podLogOptionsFromQuery(*a.(*url.Values), b.(*corev1.PodLogOptions))
	})
}

func podLogOptionsFromQuery(q url.Values, o *corev1.PodLogOptions) error {
	last := func(k string) (string, bool) {
		v := q[k]
		if len(v) == 0 {
			return "", false
		}
		return v[len(v)-1], true
	}
	boolean := func(k string, dst *bool) error {
		if v, ok := last(k); ok {
			b, err := strconv.ParseBool(v)
			if err != nil {
				return fmt.Errorf("%s: %q is not a boolean", k, v)
			}
			*dst = b
		}
		return nil
	}
	integer := func(k string, dst **int64) error {
		if v, ok := last(k); ok {
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				return fmt.Errorf("%s: %q is not an integer", k, v)
			}
			*dst = &n
		}
		return nil
	}
	if v, ok := last("container"); ok {
		o.Container = v
	}
	if v, ok := last("stream"); ok {
		o.Stream = &v
	}
	if v, ok := last("sinceTime"); ok {
		t, err := time.Parse(time.RFC3339, v)
		if err != nil {
			return fmt.Errorf("sinceTime: %q is not an RFC 3339 time", v)
		}
		mt := metav1.NewTime(t)
		o.SinceTime = &mt
	}
	for _, f := range []func() error{
		func() error { return boolean("follow", &o.Follow) },
		func() error { return boolean("previous", &o.Previous) },
		func() error { return boolean("timestamps", &o.Timestamps) },
		func() error { return boolean("insecureSkipTLSVerifyBackend", &o.InsecureSkipTLSVerifyBackend) },
		func() error { return integer("tailLines", &o.TailLines) },
		func() error { return integer("limitBytes", &o.LimitBytes) },
		func() error { return integer("sinceSeconds", &o.SinceSeconds) },
	} {
		if err := f(); err != nil {
			return err
		}
	}
	return nil
}
