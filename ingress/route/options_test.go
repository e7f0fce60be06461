package route

import (
	"slices"
	"testing"
	"time"

	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// An Ingress written for ingress-nginx keeps its ssl-redirect and proxy
// timeouts: nginx.ingress.kubernetes.io/ names mean what Portal's do, and
// Portal's win when both are there. Pins the bug where they were ignored,
// and an Ingress saying nginx.ingress.kubernetes.io/ssl-redirect "false"
// was redirected to HTTPS all the same.
func TestNginxAnnotations(t *testing.T) {
	for _, tc := range []struct {
		name         string
		annotations  map[string]string
		want         Options
		wantProblems []string
	}{
		{name: "none", want: DefaultOptions},
		{name: "nginx ssl-redirect", annotations: map[string]string{"nginx.ingress.kubernetes.io/ssl-redirect": "false"},
			want: Options{}},
		{name: "nginx timeouts", annotations: map[string]string{
			"nginx.ingress.kubernetes.io/proxy-connect-timeout": "2",
			"nginx.ingress.kubernetes.io/proxy-read-timeout":    "120",
			"nginx.ingress.kubernetes.io/proxy-send-timeout":    "30"},
			want: Options{SSLRedirect: true, ConnectTimeout: 2 * time.Second, ReadTimeout: 2 * time.Minute, SendTimeout: 30 * time.Second}},
		{name: "Portal's wins", annotations: map[string]string{
			"portal.dev/ssl-redirect": "true", "nginx.ingress.kubernetes.io/ssl-redirect": "false",
			"portal.dev/proxy-read-timeout": "5", "nginx.ingress.kubernetes.io/proxy-read-timeout": "120"},
			want: Options{SSLRedirect: true, ReadTimeout: 5 * time.Second}},
		{name: "a bad nginx value is reported under its own name", annotations: map[string]string{
			"nginx.ingress.kubernetes.io/ssl-redirect": "sure", "nginx.ingress.kubernetes.io/proxy-read-timeout": "soon"},
			want: DefaultOptions,
			wantProblems: []string{
				`annotation nginx.ingress.kubernetes.io/ssl-redirect: "sure" is not true or false; using the default (true)`,
				`annotation nginx.ingress.kubernetes.io/proxy-read-timeout: "soon" is neither a positive duration nor a number of seconds; using the default`}},
		{name: "other nginx annotations are not Portal's", annotations: map[string]string{
			"nginx.ingress.kubernetes.io/rewrite-target": "/"}, want: DefaultOptions},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ing := &networkingv1.Ingress{ObjectMeta: metav1.ObjectMeta{Name: "a", Annotations: tc.annotations}}
			var problems []string
			got := parseOptions(ing, func(_, msg string) { problems = append(problems, msg) })
			if *got != tc.want {
				t.Errorf("got %+v, want %+v", *got, tc.want)
			}
			if !slices.Equal(problems, tc.wantProblems) {
				t.Errorf("problems: got %q, want %q", problems, tc.wantProblems)
			}
		})
	}
}
