package envvars

import "strings"

// Expand replaces each $(NAME) in s with mapping(NAME). "$$" is a literal
// "$"; a "$" that starts no reference, and an unterminated "$(", are kept
// as written. These are the rules of container command, args and env
// values in Kubernetes.
func Expand(s string, mapping func(string) string) string {
	var b strings.Builder
	last := 0
	for i := 0; i < len(s); i++ {
		if s[i] != '$' || i+1 >= len(s) {
			continue
		}
		b.WriteString(s[last:i])
		switch next := s[i+1]; next {
		case '$':
			b.WriteByte('$')
			i++
		case '(':
			end := strings.IndexByte(s[i+2:], ')')
			if end < 0 {
				b.WriteString("$(")
				i++
			} else {
				b.WriteString(mapping(s[i+2 : i+2+end]))
				i += 2 + end
			}
		default:
			b.WriteByte('$')
			b.WriteByte(next)
			i++
		}
		last = i + 1
	}
	b.WriteString(s[last:])
	return b.String()
}

// ExpandArgs expands command or args against env, as kubelet does for a
// container's command and args.
func ExpandArgs(args []string, env []Var) []string {
	m := make(map[string]string, len(env))
	for _, v := range env {
		m[v.Name] = v.Value
	}
	out := make([]string, len(args))
	for i, a := range args {
		out[i] = Expand(a, lookup(m))
	}
	return out
}
