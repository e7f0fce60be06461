// Package auditlog turns on the API server's audit log: upstream's
// audit.k8s.io/v1 events as JSON lines in a file, chosen by an upstream
// audit policy file (kube-apiserver's --audit-log-path and
// --audit-policy-file). Loading the policy, writing the log and the
// handler in the request chain are k8s.io/apiserver's own; this package
// adds one rule Portal keeps whatever the policy says: the bodies of
// requests and responses that carry credentials (Secrets, TokenRequests,
// TokenReviews) are never logged.
package auditlog

import (
	auditinternal "k8s.io/apiserver/pkg/apis/audit"
	"k8s.io/apiserver/pkg/audit"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	genericapiserver "k8s.io/apiserver/pkg/server"
	genericoptions "k8s.io/apiserver/pkg/server/options"
	"k8s.io/klog/v2"
)

// Options are the audit flags, kube-apiserver's names.
type Options struct {
	// Path is the file events are appended to ("-" is standard output);
	// empty turns the log off.
	Path string
	// PolicyFile is the audit.k8s.io/v1 Policy that decides what is
	// logged at which level. As upstream, a log without a policy records
	// nothing.
	PolicyFile string
}

// ApplyTo sets c's audit backend and policy from o. It is a no-op when o
// sets no Path.
func ApplyTo(o Options, c *genericapiserver.Config) error {
	if o.Path == "" {
		return nil
	}
	if o.PolicyFile == "" {
		klog.InfoS("Warning: --audit-log-path without --audit-policy-file records nothing, as in kube-apiserver", "path", o.Path)
	}
	opts := genericoptions.NewAuditOptions()
	opts.LogOptions.Path = o.Path
	opts.PolicyFile = o.PolicyFile
	if errs := opts.Validate(); len(errs) > 0 {
		return errs[0]
	}
	if err := opts.ApplyTo(c); err != nil {
		return err
	}
	if c.AuditPolicyRuleEvaluator != nil {
		c.AuditPolicyRuleEvaluator = NoCredentialBodies(c.AuditPolicyRuleEvaluator)
	}
	return nil
}

// NoCredentialBodies wraps a policy so that requests to resources whose
// bodies carry credentials are logged at Metadata at most: who did what
// to which object and with what result, never the object. Upstream leaves
// this to the policy author; one RequestResponse rule too broad would put
// every Secret's data in the log.
func NoCredentialBodies(e audit.PolicyRuleEvaluator) audit.PolicyRuleEvaluator {
	return noCredentialBodies{e}
}

type noCredentialBodies struct{ audit.PolicyRuleEvaluator }

func (e noCredentialBodies) EvaluatePolicyRule(a authorizer.Attributes) audit.RequestAuditConfig {
	cfg := e.PolicyRuleEvaluator.EvaluatePolicyRule(a)
	if cfg.Level.GreaterOrEqual(auditinternal.LevelRequest) && carriesCredentials(a) {
		cfg.Level = auditinternal.LevelMetadata
	}
	return cfg
}

// carriesCredentials reports whether a request's or response's body may
// hold a credential: a Secret's data, a token minted for a service
// account, or a token sent for review.
func carriesCredentials(a authorizer.Attributes) bool {
	if !a.IsResourceRequest() {
		return false
	}
	switch {
	case a.GetAPIGroup() == "" && a.GetResource() == "secrets":
		return true
	case a.GetAPIGroup() == "" && a.GetResource() == "serviceaccounts" && a.GetSubresource() == "token":
		return true
	case a.GetAPIGroup() == "authentication.k8s.io" && a.GetResource() == "tokenreviews":
		return true
	}
	return false
}
