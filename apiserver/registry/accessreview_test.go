package registry

import (
	"context"
	"strings"
	"testing"

	authorizationv1 "k8s.io/api/authorization/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	genericapirequest "k8s.io/apiserver/pkg/endpoints/request"
)

// onlyAlice allows alice to get pods in namespace a, denies bob
// everything, and has no opinion on anyone else.
var onlyAlice = authorizer.AuthorizerFunc(func(_ context.Context, a authorizer.Attributes) (authorizer.Decision, string, error) {
	switch a.GetUser().GetName() {
	case "alice":
		if a.GetVerb() == "get" && a.GetResource() == "pods" && a.GetNamespace() == "a" {
			return authorizer.DecisionAllow, "alice reads pods", nil
		}
	case "bob":
		return authorizer.DecisionDeny, "bob is banned", nil
	}
	return authorizer.DecisionNoOpinion, "", nil
})

func TestAccessReviews(t *testing.T) {
	getPods := &authorizationv1.ResourceAttributes{Namespace: "a", Verb: "get", Resource: "pods"}
	tests := []struct {
		name      string
		rest      *AccessReviewREST
		requester string
		namespace string
		review    runtime.Object
		want      authorizationv1.SubjectAccessReviewStatus
		// wantErr is part of the 4xx message wanted instead of an answer.
		wantErr string
	}{
		{name: "self, allowed", rest: NewSelfSubjectAccessReviewREST(onlyAlice), requester: "alice",
			review: &authorizationv1.SelfSubjectAccessReview{Spec: authorizationv1.SelfSubjectAccessReviewSpec{ResourceAttributes: getPods}},
			want:   authorizationv1.SubjectAccessReviewStatus{Allowed: true, Reason: "alice reads pods"}},
		{name: "self, no opinion", rest: NewSelfSubjectAccessReviewREST(onlyAlice), requester: "carol",
			review: &authorizationv1.SelfSubjectAccessReview{Spec: authorizationv1.SelfSubjectAccessReviewSpec{ResourceAttributes: getPods}}},
		{name: "self, no attributes", rest: NewSelfSubjectAccessReviewREST(onlyAlice), requester: "alice",
			review:  &authorizationv1.SelfSubjectAccessReview{},
			wantErr: "exactly one of nonResourceAttributes or resourceAttributes must be specified"},
		{name: "subject, asked about bob", rest: NewSubjectAccessReviewREST(onlyAlice), requester: "admin",
			review: &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{User: "bob", ResourceAttributes: getPods}},
			want:   authorizationv1.SubjectAccessReviewStatus{Denied: true, Reason: "bob is banned"}},
		{name: "subject, no user or group", rest: NewSubjectAccessReviewREST(onlyAlice), requester: "admin",
			review:  &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{ResourceAttributes: getPods}},
			wantErr: "at least one of user or group must be specified"},
		{name: "local, in its namespace", rest: NewLocalSubjectAccessReviewREST(onlyAlice), requester: "admin", namespace: "a",
			review: &authorizationv1.LocalSubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{User: "alice", ResourceAttributes: getPods}},
			want:   authorizationv1.SubjectAccessReviewStatus{Allowed: true, Reason: "alice reads pods"}},
		{name: "local, another namespace", rest: NewLocalSubjectAccessReviewREST(onlyAlice), requester: "admin", namespace: "b",
			review:  &authorizationv1.LocalSubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{User: "alice", ResourceAttributes: getPods}},
			wantErr: `spec.resourceAttributes.namespace: Invalid value: "a": must match the namespace the review is created in ("b")`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ctx := genericapirequest.WithUser(context.Background(), &user.DefaultInfo{Name: tc.requester})
			ctx = genericapirequest.WithNamespace(ctx, tc.namespace)
			out, err := tc.rest.Create(ctx, tc.review, nil, nil)
			if tc.wantErr != "" {
				if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("got %v, want 422 saying %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var got authorizationv1.SubjectAccessReviewStatus
			switch o := out.(type) {
			case *authorizationv1.SelfSubjectAccessReview:
				got = o.Status
			case *authorizationv1.SubjectAccessReview:
				got = o.Status
			case *authorizationv1.LocalSubjectAccessReview:
				got = o.Status
			}
			if got != tc.want {
				t.Errorf("got %+v, want %+v", got, tc.want)
			}
		})
	}
}
