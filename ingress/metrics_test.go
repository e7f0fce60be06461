package ingress

import "testing"

func TestStatusClass(t *testing.T) {
	for _, tc := range []struct {
		code int
		want string
	}{
		{0, "other"}, {99, "other"}, {100, "1xx"}, {199, "1xx"}, {200, "2xx"}, {302, "3xx"},
		{404, "4xx"}, {499, "4xx"}, {503, "5xx"}, {599, "5xx"}, {600, "other"},
	} {
		if got := statusClass(tc.code); got != tc.want {
			t.Errorf("statusClass(%d): got %q, want %q", tc.code, got, tc.want)
		}
	}
}
