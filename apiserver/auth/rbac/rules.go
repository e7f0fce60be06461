package rbac

import (
	"strings"

	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apiserver/pkg/authorization/authorizer"
)

// ruleAllows reports whether rule grants the request a. A resource rule
// names "resource/subresource" to grant a subresource, "*/subresource" for
// that subresource of every resource, or "*" for everything; resourceNames,
// when set, limit the rule to those names. A non-resource rule's URL may
// end in "*" to cover every path under it.
func ruleAllows(a authorizer.Attributes, rule *rbacv1.PolicyRule) bool {
	if !has(rule.Verbs, a.GetVerb()) {
		return false
	}
	if !a.IsResourceRequest() {
		return urlMatches(rule.NonResourceURLs, a.GetPath())
	}
	return has(rule.APIGroups, a.GetAPIGroup()) &&
		resourceMatches(rule.Resources, a.GetResource(), a.GetSubresource()) &&
		(len(rule.ResourceNames) == 0 || contains(rule.ResourceNames, a.GetName()))
}

// has reports whether set holds want or the wildcard "*".
func has(set []string, want string) bool {
	for _, s := range set {
		if s == rbacv1.VerbAll || s == want {
			return true
		}
	}
	return false
}

func contains(set []string, want string) bool {
	for _, s := range set {
		if s == want {
			return true
		}
	}
	return false
}

func resourceMatches(rules []string, resource, subresource string) bool {
	combined := resource
	if subresource != "" {
		combined = resource + "/" + subresource
	}
	for _, r := range rules {
		switch {
		case r == rbacv1.ResourceAll, r == combined:
			return true
		case subresource != "" && r == "*/"+subresource:
			return true
		}
	}
	return false
}

func urlMatches(rules []string, path string) bool {
	for _, u := range rules {
		switch {
		case u == rbacv1.NonResourceAll, u == path:
			return true
		case strings.HasSuffix(u, "*") && strings.HasPrefix(path, strings.TrimSuffix(u, "*")):
			return true
		}
	}
	return false
}
