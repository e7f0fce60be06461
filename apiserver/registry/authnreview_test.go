package registry

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"

	authenticationv1 "k8s.io/api/authentication/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apiserver/pkg/authentication/authenticator"
	"k8s.io/apiserver/pkg/authentication/user"
	genericapirequest "k8s.io/apiserver/pkg/endpoints/request"
)

// tokens knows "good" as frank, audience api unless the request names
// others, and fails "broken".
var tokens = authenticator.RequestFunc(func(req *http.Request) (*authenticator.Response, bool, error) {
	switch req.Header.Get("Authorization") {
	case "Bearer good":
		auds, _ := authenticator.AudiencesFrom(req.Context())
		if len(auds) > 0 && !auds.Has("api") {
			return nil, false, errors.New("token audiences are invalid")
		}
		return &authenticator.Response{User: &user.DefaultInfo{Name: "frank", Groups: []string{"team-f"}},
			Audiences: authenticator.Audiences{"api"}}, true, nil
	case "Bearer broken":
		return nil, false, errors.New("token is malformed")
	}
	return nil, false, nil
})

func TestTokenReview(t *testing.T) {
	tests := []struct {
		name      string
		token     string
		audiences []string
		want      authenticationv1.TokenReviewStatus
		wantErr   string
	}{
		{name: "good token", token: "good", want: authenticationv1.TokenReviewStatus{Authenticated: true,
			User: authenticationv1.UserInfo{Username: "frank", Groups: []string{"team-f"}}, Audiences: []string{"api"}}},
		{name: "good token, its audience", token: "good", audiences: []string{"api", "other"}, want: authenticationv1.TokenReviewStatus{Authenticated: true,
			User: authenticationv1.UserInfo{Username: "frank", Groups: []string{"team-f"}}, Audiences: []string{"api"}}},
		{name: "good token, another audience", token: "good", audiences: []string{"other"},
			want: authenticationv1.TokenReviewStatus{Error: "token audiences are invalid"}},
		{name: "unknown token", token: "nobody"},
		{name: "malformed token", token: "broken", want: authenticationv1.TokenReviewStatus{Error: "token is malformed"}},
		{name: "no token", token: "", wantErr: "token is required"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ctx := genericapirequest.WithUser(context.Background(), &user.DefaultInfo{Name: "reviewer"})
			review := &authenticationv1.TokenReview{Spec: authenticationv1.TokenReviewSpec{Token: tc.token, Audiences: tc.audiences}}
			out, err := NewTokenReviewREST(tokens, []string{"api"}).Create(ctx, review, nil, nil)
			if tc.wantErr != "" {
				if !apierrors.IsBadRequest(err) || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("got %v, want 400 saying %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			got := out.(*authenticationv1.TokenReview)
			if got.Spec.Token != "" {
				t.Errorf("got the token echoed in the answer")
			}
			if g, w := got.Status, tc.want; g.Authenticated != w.Authenticated || g.Error != w.Error || g.User.Username != w.User.Username ||
				strings.Join(g.User.Groups, ",") != strings.Join(w.User.Groups, ",") || strings.Join(g.Audiences, ",") != strings.Join(w.Audiences, ",") {
				t.Errorf("got %+v, want %+v", g, w)
			}
		})
	}
}
