package scheme

import (
	"fmt"
	"net/url"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/conversion"
	"k8s.io/apimachinery/pkg/runtime"
)

// addStreamParameterConversions teaches the scheme to read the options of
// the streaming subresources (pods/exec, pods/attach, pods/portforward,
// nodes/proxy) from a query string, with the parameter names kubectl sends:
// stdin, stdout, stderr, tty, container, command (repeated) and ports
// (repeated), path.
func addStreamParameterConversions(s *runtime.Scheme) error {
	for _, c := range []struct {
		to any
		f  func(url.Values, any) error
	}{
		{(*corev1.PodExecOptions)(nil), func(q url.Values, o any) error { return execOptionsFromQuery(q, o.(*corev1.PodExecOptions)) }},
		{(*corev1.PodAttachOptions)(nil), func(q url.Values, o any) error { return attachOptionsFromQuery(q, o.(*corev1.PodAttachOptions)) }},
		{(*corev1.PodPortForwardOptions)(nil), func(q url.Values, o any) error {
			return portForwardOptionsFromQuery(q, o.(*corev1.PodPortForwardOptions))
		}},
		{(*corev1.NodeProxyOptions)(nil), func(q url.Values, o any) error {
			o.(*corev1.NodeProxyOptions).Path = lastValue(q, "path")
			return nil
		}},
	} {
		f := c.f
		if err := s.AddConversionFunc((*url.Values)(nil), c.to, func(a, b any, _ conversion.Scope) error {
			return f(*a.(*url.Values), b)
		}); err != nil {
			return err
		}
	}
	return nil
}

// streamFlags reads the stream switches shared by exec and attach.
func streamFlags(q url.Values, stdin, stdout, stderr, tty *bool) error {
	for _, f := range []struct {
		name string
		dst  *bool
	}{{"stdin", stdin}, {"stdout", stdout}, {"stderr", stderr}, {"tty", tty}} {
		if v := q[f.name]; len(v) > 0 {
			b, err := strconv.ParseBool(v[len(v)-1])
			if err != nil {
				return fmt.Errorf("%s: %q is not a boolean", f.name, v[len(v)-1])
			}
			*f.dst = b
		}
	}
	return nil
}

func execOptionsFromQuery(q url.Values, o *corev1.PodExecOptions) error {
	o.Container = lastValue(q, "container")
	o.Command = append([]string(nil), q["command"]...)
	return streamFlags(q, &o.Stdin, &o.Stdout, &o.Stderr, &o.TTY)
}

func attachOptionsFromQuery(q url.Values, o *corev1.PodAttachOptions) error {
	o.Container = lastValue(q, "container")
	return streamFlags(q, &o.Stdin, &o.Stdout, &o.Stderr, &o.TTY)
}

func portForwardOptionsFromQuery(q url.Values, o *corev1.PodPortForwardOptions) error {
	o.Ports = nil
	for _, v := range q["ports"] {
		p, err := strconv.ParseInt(v, 10, 32)
		if err != nil {
			return fmt.Errorf("ports: %q is not an integer", v)
		}
		o.Ports = append(o.Ports, int32(p))
	}
	return nil
}

func lastValue(q url.Values, k string) string {
	if v := q[k]; len(v) > 0 {
		return v[len(v)-1]
	}
	return ""
}
