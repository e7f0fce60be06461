package auditlog

import (
	"testing"

	auditinternal "k8s.io/apiserver/pkg/apis/audit"
	"k8s.io/apiserver/pkg/audit"
	"k8s.io/apiserver/pkg/authorization/authorizer"
)

// fixedLevel is a policy that logs every request at one level.
type fixedLevel auditinternal.Level

func (l fixedLevel) EvaluatePolicyRule(authorizer.Attributes) audit.RequestAuditConfig {
	return audit.RequestAuditConfig{Level: auditinternal.Level(l)}
}

func TestNoCredentialBodies(t *testing.T) {
	res := func(group, resource, sub string) authorizer.Attributes {
		return authorizer.AttributesRecord{Verb: "create", APIGroup: group, Resource: resource, Subresource: sub, ResourceRequest: true}
	}
	tests := []struct {
		name   string
		policy auditinternal.Level
		attrs  authorizer.Attributes
		want   auditinternal.Level
	}{
		{"secret at RequestResponse", auditinternal.LevelRequestResponse, res("", "secrets", ""), auditinternal.LevelMetadata},
		{"secret at Request", auditinternal.LevelRequest, res("", "secrets", ""), auditinternal.LevelMetadata},
		{"secret at Metadata stays", auditinternal.LevelMetadata, res("", "secrets", ""), auditinternal.LevelMetadata},
		{"secret at None stays", auditinternal.LevelNone, res("", "secrets", ""), auditinternal.LevelNone},
		{"token request", auditinternal.LevelRequestResponse, res("", "serviceaccounts", "token"), auditinternal.LevelMetadata},
		{"token review", auditinternal.LevelRequestResponse, res("authentication.k8s.io", "tokenreviews", ""), auditinternal.LevelMetadata},
		{"service account itself", auditinternal.LevelRequestResponse, res("", "serviceaccounts", ""), auditinternal.LevelRequestResponse},
		{"configmap", auditinternal.LevelRequestResponse, res("", "configmaps", ""), auditinternal.LevelRequestResponse},
		{"secrets of another group", auditinternal.LevelRequest, res("example.com", "secrets", ""), auditinternal.LevelRequest},
		{"non-resource path", auditinternal.LevelRequestResponse, authorizer.AttributesRecord{Verb: "get", Path: "/api/v1/secrets"}, auditinternal.LevelRequestResponse},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := NoCredentialBodies(fixedLevel(tc.policy)).EvaluatePolicyRule(tc.attrs).Level
			if got != tc.want {
				t.Errorf("got level %s, want %s", got, tc.want)
			}
		})
	}
}
