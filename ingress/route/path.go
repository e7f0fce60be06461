package route

import (
	"path"
	"strings"

	networkingv1 "k8s.io/api/networking/v1"
)

// cleanPath returns the request path as rules are compared with it: with
// "." and ".." elements resolved and repeated slashes merged, as nginx
// normalises a URI before matching locations, so that "/a/../admin" cannot
// slip past a rule for "/admin". A trailing slash is kept: it matters to
// Exact rules. The common, already clean path is returned as is.
func cleanPath(p string) string {
	if p == "" {
		return "/"
	}
	if p[0] == '/' && !needsCleaning(p) {
		return p
	}
	c := path.Clean("/" + p)
	if strings.HasSuffix(p, "/") && c != "/" {
		c += "/"
	}
	return c
}

// needsCleaning reports whether p holds an empty, "." or ".." element.
func needsCleaning(p string) bool {
	for i := 0; i < len(p); i++ {
		if p[i] != '/' {
			continue
		}
		rest := p[i+1:]
		switch {
		case strings.HasPrefix(rest, "/"),
			rest == ".", strings.HasPrefix(rest, "./"),
			rest == "..", strings.HasPrefix(rest, "../"):
			return true
		}
	}
	return false
}

// matchPath returns how a rule's path is compared with request paths:
// the path for Exact, the path without a trailing slash for Prefix (and
// ImplementationSpecific, matched as Prefix), "/" for an empty
// ImplementationSpecific path. ok is false for a path the specification
// does not allow (Exact and Prefix paths must start with "/").
func matchPath(p string, pt networkingv1.PathType) (match string, prefix, ok bool) {
	switch pt {
	case networkingv1.PathTypeExact:
		return p, false, strings.HasPrefix(p, "/")
	case networkingv1.PathTypeImplementationSpecific:
		if p == "" {
			return "/", true, true
		}
	}
	if !strings.HasPrefix(p, "/") {
		return "", true, false
	}
	if p != "/" {
		p = strings.TrimRight(p, "/")
		if p == "" {
			p = "/"
		}
	}
	return p, true, true
}

// matches reports whether the rule matches a cleaned request path.
func (r *Rule) matches(p string) bool {
	if !r.prefix {
		return p == r.match
	}
	m := r.match
	if m == "/" {
		return true
	}
	return strings.HasPrefix(p, m) && (len(p) == len(m) || p[len(m)] == '/')
}

// before reports whether a is tried before b: the longer path first, and
// at equal length Exact before Prefix.
func before(a, b *Rule) bool {
	if len(a.match) != len(b.match) {
		return len(a.match) > len(b.match)
	}
	return !a.prefix && b.prefix
}
