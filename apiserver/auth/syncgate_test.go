package auth

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	genericfilters "k8s.io/apiserver/pkg/endpoints/filters"
	"k8s.io/apiserver/pkg/endpoints/request"
)

// policyAllowsAlice is a mode whose caches, once filled, allow alice; empty
// they allow nothing, as RBAC's listers do before their informers sync.
type policyAllowsAlice struct {
	filled *atomic.Bool
}

func (p policyAllowsAlice) Authorize(ctx context.Context, a authorizer.Attributes) (authorizer.Decision, string, error) {
	if p.filled.Load() && a.GetUser().GetName() == "alice" {
		return authorizer.DecisionAllow, "", nil
	}
	return authorizer.DecisionNoOpinion, "", nil
}

func (p policyAllowsAlice) ConditionsAwareAuthorize(ctx context.Context, a authorizer.Attributes) authorizer.ConditionsAwareDecision {
	return authorizer.ConditionsAwareDecisionFromParts(p.Authorize(ctx, a))
}

func (policyAllowsAlice) EvaluateConditions(context.Context, authorizer.ConditionsAwareDecision, authorizer.ConditionsData) (authorizer.Decision, string, error) {
	return authorizer.DecisionDeny, "", authorizer.ErrorConditionEvaluationNotSupported
}

// TestNoForbiddenBeforeRBACSynced pins the 403 burst of a restarted server:
// requests that came before the RBAC caches synced were refused although
// the policy allowed them. They now wait for the caches, and a server whose
// caches never fill answers a server error, never 403.
func TestNoForbiddenBeforeRBACSynced(t *testing.T) {
	tests := []struct {
		name     string
		user     string
		syncedIn time.Duration // -1: never
		want     int
	}{
		{name: "synced before the request", user: "alice", syncedIn: 0, want: http.StatusOK},
		{name: "synced while the request waits", user: "alice", syncedIn: 2 * time.Second, want: http.StatusOK},
		{name: "never synced: a server error", user: "alice", syncedIn: -1, want: http.StatusInternalServerError},
		{name: "refused by the synced policy", user: "bob", syncedIn: time.Second, want: http.StatusForbidden},
		{name: "system:masters does not wait", user: "admin", syncedIn: -1, want: http.StatusOK},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				var filled atomic.Bool
				synced := func() bool { return filled.Load() }
				if tc.syncedIn == 0 {
					filled.Store(true)
				}
				if tc.syncedIn > 0 {
					time.AfterFunc(tc.syncedIn, func() { filled.Store(true) })
				}
				chain, _, err := Chain(Named{Mode: ModeRBAC, Authorizer: WaitForSync(policyAllowsAlice{filled: &filled}, synced)})
				if err != nil {
					t.Fatal(err)
				}
				ok := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusOK) })
				scheme := runtime.NewScheme()
				metav1.AddToGroupVersion(scheme, schema.GroupVersion{Version: "v1"})
				codecs := serializer.NewCodecFactory(scheme)
				h := genericfilters.WithAuthorization(ok, chain, codecs)

				u := &user.DefaultInfo{Name: tc.user, Groups: []string{user.AllAuthenticated}}
				if tc.user == "admin" {
					u.Groups = append(u.Groups, user.SystemPrivilegedGroup)
				}
				req := httptest.NewRequest(http.MethodGet, "/api/v1/namespaces/default/services", nil)
				ctx := request.WithUser(req.Context(), u)
				ctx = request.WithRequestInfo(ctx, &request.RequestInfo{IsResourceRequest: true, Verb: "list",
					APIVersion: "v1", Namespace: "default", Resource: "services", Path: req.URL.Path})
				rec := httptest.NewRecorder()
				h.ServeHTTP(rec, req.WithContext(ctx))
				if rec.Code != tc.want {
					t.Errorf("got status %d, want %d (body %q)", rec.Code, tc.want, rec.Body.String())
				}
			})
		})
	}
}
