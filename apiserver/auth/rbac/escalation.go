package rbac

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/component-helpers/auth/rbac/validation"
)

// ConfirmNoEscalation returns an error listing the rules of want that u
// does not hold in namespace, or nil when u holds them all. Its message
// reads as upstream's, so that a refused grant looks the same to users.
func (r *Resolver) ConfirmNoEscalation(u user.Info, namespace string, want []rbacv1.PolicyRule) error {
	held, resolveErr := r.RulesFor(u, namespace)
	covered, missing := validation.Covers(held, want)
	if covered {
		return nil
	}
	var lines []string
	for _, m := range compact(missing) {
		lines = append(lines, compactString(m))
	}
	slices.Sort(lines)
	lines = slices.Compact(lines)
	msg := fmt.Sprintf("user %q (groups=%q) is attempting to grant RBAC permissions not currently held:\n%s",
		u.GetName(), u.GetGroups(), strings.Join(lines, "\n"))
	if resolveErr != nil {
		msg += fmt.Sprintf("; resolution errors: %v", resolveErr)
	}
	return errors.New(msg)
}

// compact merges the single-verb rules Covers reports as missing back
// into one rule per group, resource (or URL) and name, listing the verbs.
func compact(rules []rbacv1.PolicyRule) []rbacv1.PolicyRule {
	type key struct{ group, resource, name, url string }
	index := map[key]int{}
	var out []rbacv1.PolicyRule
	for _, r := range rules {
		if len(r.APIGroups) > 1 || len(r.Resources) > 1 || len(r.ResourceNames) > 1 || len(r.NonResourceURLs) > 1 {
			out = append(out, r)
			continue
		}
		k := key{first(r.APIGroups), first(r.Resources), first(r.ResourceNames), first(r.NonResourceURLs)}
		if i, ok := index[k]; ok {
			for _, v := range r.Verbs {
				if !contains(out[i].Verbs, v) {
					out[i].Verbs = append(out[i].Verbs, v)
				}
			}
			continue
		}
		index[k] = len(out)
		out = append(out, *r.DeepCopy())
	}
	return out
}

func first(s []string) string {
	if len(s) == 0 {
		return ""
	}
	return s[0]
}

// compactString prints a rule naming only its set fields, e.g.
// {APIGroups:[""], Resources:["pods"], Verbs:["get" "list"]}.
func compactString(r rbacv1.PolicyRule) string {
	var parts []string
	for _, f := range []struct {
		name string
		vals []string
	}{
		{"APIGroups", r.APIGroups}, {"Resources", r.Resources}, {"NonResourceURLs", r.NonResourceURLs},
		{"ResourceNames", r.ResourceNames}, {"Verbs", r.Verbs},
	} {
		if len(f.vals) > 0 {
			parts = append(parts, fmt.Sprintf("%s:%q", f.name, f.vals))
		}
	}
	return "{" + strings.Join(parts, ", ") + "}"
}
