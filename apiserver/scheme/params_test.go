package scheme

import (
	"net/url"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
)

func TestPodLogOptionsFromQuery(t *testing.T) {
	cases := []struct {
		name    string
		query   string
		check   func(*corev1.PodLogOptions) string
		wantErr string
	}{
		{name: "kubectl logs -f --previous --tail", query: "container=web&follow=true&previous=true&tailLines=20",
			check: func(o *corev1.PodLogOptions) string {
				if o.Container != "web" || !o.Follow || !o.Previous || o.TailLines == nil || *o.TailLines != 20 {
					return "options not all read"
				}
				return ""
			}},
		{name: "since time", query: "sinceTime=2026-11-26T03:00:00Z&timestamps=1",
			check: func(o *corev1.PodLogOptions) string {
				if o.SinceTime == nil || o.SinceTime.Hour() != 3 || !o.Timestamps {
					return "sinceTime or timestamps not read"
				}
				return ""
			}},
		{name: "bad boolean names the parameter", query: "follow=maybe", wantErr: "follow"},
		{name: "bad integer names the parameter", query: "tailLines=ten", wantErr: "tailLines"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			q, _ := url.ParseQuery(tc.query)
			var o corev1.PodLogOptions
			err := ParameterCodec.DecodeParameters(q, corev1.SchemeGroupVersion, &o)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("got error %v, want one naming %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if msg := tc.check(&o); msg != "" {
				t.Errorf("%s: got %+v", msg, o)
			}
		})
	}
}
