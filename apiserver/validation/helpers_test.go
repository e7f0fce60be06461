package validation

import (
	"net/netip"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/util/validation/field"
)

// wantErr describes one expected error: its field path, its type and,
// optionally, a fragment of its detail.
type wantErr struct {
	field  string
	typ    field.ErrorType
	detail string
}

func e(path string, typ field.ErrorType, detail ...string) wantErr {
	return wantErr{field: path, typ: typ, detail: strings.Join(detail, "")}
}

// checkErrs requires got to hold exactly the wanted errors, in any order.
func checkErrs(t *testing.T, got field.ErrorList, want ...wantErr) {
	t.Helper()
	used := make([]bool, len(got))
	for _, w := range want {
		found := false
		for i, g := range got {
			if used[i] || g.Field != w.field || g.Type != w.typ || !strings.Contains(g.Detail, w.detail) {
				continue
			}
			used[i], found = true, true
			break
		}
		if !found {
			t.Errorf("got errors %v, want one on %s of type %s with detail %q", got, w.field, w.typ, w.detail)
		}
	}
	for i, g := range got {
		if !used[i] {
			t.Errorf("got unexpected error %q (type %s), want only %v", g.Error(), g.Type, want)
		}
	}
}

var (
	cfgV4   = ServiceConfig{ClusterIPRanges: []netip.Prefix{netip.MustParsePrefix("10.0.0.0/24")}}
	cfgDual = ServiceConfig{ClusterIPRanges: []netip.Prefix{
		netip.MustParsePrefix("10.0.0.0/24"), netip.MustParsePrefix("fd00::/108"),
	}}
)

func ptr[T any](v T) *T { return &v }
