package registry

import (
	"strings"
	"testing"

	authenticationv1 "k8s.io/api/authentication/v1"
	"k8s.io/utils/ptr"
)

// TestValidateTokenRequest checks upstream's bounds and messages.
func TestValidateTokenRequest(t *testing.T) {
	for _, tc := range []struct {
		name string
		spec authenticationv1.TokenRequestSpec
		want string // "" when valid
	}{
		{name: "an hour", spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To(int64(3600))}},
		{name: "ten minutes", spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To(int64(600))}},
		{name: "too short", spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To(int64(599))},
			want: "spec.expirationSeconds: Invalid value: 599: may not specify a duration less than 10 minutes"},
		{name: "too long", spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To(int64(1<<32 + 1))},
			want: "may not specify a duration larger than 2^32 seconds"},
		// 3600 + 2^55 seconds wraps to exactly an hour as a Duration.
		{name: "so long it overflows", spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To(int64(3600 + 1<<55))},
			want: "spec.expirationSeconds: Invalid value: 36028797018967568: may not specify a duration larger than 2^32 seconds"},
		{name: "overflows to negative", spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To(int64(1 << 62))},
			want: "may not specify a duration larger than 2^32 seconds"},
		{name: "bound to a pod", spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To(int64(3600)),
			BoundObjectRef: &authenticationv1.BoundObjectReference{Kind: "Pod", APIVersion: "v1", Name: "p"}}},
		{name: "bound to a deployment", spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To(int64(3600)),
			BoundObjectRef: &authenticationv1.BoundObjectReference{Kind: "Deployment", Name: "d"}},
			want: `spec.boundObjectRef.kind: Unsupported value: "Deployment": supported values: "Pod", "Node", "Secret"`},
		{name: "bound without a name", spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To(int64(3600)),
			BoundObjectRef: &authenticationv1.BoundObjectReference{Kind: "Pod"}},
			want: "spec.boundObjectRef.name: Required value"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			errs := validateTokenRequest(&authenticationv1.TokenRequest{Spec: tc.spec})
			got := errs.ToAggregate()
			switch {
			case tc.want == "" && got != nil:
				t.Fatalf("got %v, want valid", got)
			case tc.want != "" && (got == nil || !strings.Contains(got.Error(), tc.want)):
				t.Fatalf("got %v, want %q", got, tc.want)
			}
		})
	}
}
