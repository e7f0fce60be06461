package auth

import (
	"slices"
	"testing"

	"k8s.io/apiserver/pkg/authentication/user"
)

func TestNodeName(t *testing.T) {
	for _, tc := range []struct {
		name   string
		user   user.Info
		want   string
		isNode bool
	}{
		{"node in system:nodes", &user.DefaultInfo{Name: "system:node:n1", Groups: []string{"system:nodes"}}, "n1", true},
		{"node name without the group", &user.DefaultInfo{Name: "system:node:n1"}, "", false},
		{"group without a node name", &user.DefaultInfo{Name: "bob", Groups: []string{"system:nodes"}}, "", false},
		{"empty node name", &user.DefaultInfo{Name: "system:node:", Groups: []string{"system:nodes"}}, "", false},
		{"no user", nil, "", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := NodeName(tc.user)
			if got != tc.want || ok != tc.isNode {
				t.Errorf("got %q, %v; want %q, %v", got, ok, tc.want, tc.isNode)
			}
		})
	}
}

func TestDefaultGroups(t *testing.T) {
	for _, tc := range []struct {
		user string
		want []string
	}{
		{"system:node:n1", []string{"system:nodes"}},
		{"system:node:", nil},
		{"system:kube-proxy", nil},
		{"bob", nil},
	} {
		t.Run(tc.user, func(t *testing.T) {
			if got := DefaultGroups(tc.user); !slices.Equal(got, tc.want) {
				t.Errorf("got %v, want %v", got, tc.want)
			}
		})
	}
}
