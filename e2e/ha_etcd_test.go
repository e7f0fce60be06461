package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// clientAt is an admin client of the node a, reaching the API of node at
// on the LAN: one server's credentials at another server.
func (b *haBed) clientAt(a, at *haNode) kubernetes.Interface {
	b.t.Helper()
	cfg := a.Server.RESTConfig()
	cfg.Host = at.URL()
	cfg.Dial = a.NS.DialContext
	c, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		b.t.Fatal(err)
	}
	return c
}

// TestHAEtcdJoin: --cluster-init on one server and --join on two more make
// a cluster of three etcd members; every server serves what another wrote
// and accepts the others' client certificates; a fourth joins and then
// leaves with --leave, and the member list is right both times.
func TestHAEtcdJoin(t *testing.T) {
	b := newHABed(t, 3)
	b.Start()
	s1, s2, s3 := b.Nodes[0], b.Nodes[1], b.Nodes[2]
	for _, n := range b.Nodes {
		b.WaitMembers(n, "s1", "s2", "s3")
	}
	ctx := context.Background()
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "written-on-s2"}, Data: map[string]string{"k": "v"}}
	if _, err := b.clientAt(s1, s2).CoreV1().ConfigMaps("default").Create(ctx, cm, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create through s2 with s1's admin credentials: %v", err)
	}
	got, err := b.clientAt(s2, s3).CoreV1().ConfigMaps("default").Get(ctx, "written-on-s2", metav1.GetOptions{})
	if err != nil || got.Data["k"] != "v" {
		t.Fatalf("read through s3 with s2's admin credentials: %v, %v", got, err)
	}

	// A ServiceAccount token issued by one server authenticates at another.
	var tok *authenticationv1.TokenRequest
	eventually(t, "a token of default/default from s1", func() (bool, string) {
		var err error
		tok, err = b.clientAt(s1, s1).CoreV1().ServiceAccounts("default").CreateToken(ctx, "default", &authenticationv1.TokenRequest{}, metav1.CreateOptions{})
		return err == nil, fmt.Sprint(err)
	})
	cfg := rest.AnonymousClientConfig(s3.Server.RESTConfig())
	cfg.Host, cfg.Dial, cfg.BearerToken = s3.URL(), s3.NS.DialContext, tok.Status.Token
	review, err := kubernetes.NewForConfigOrDie(cfg).AuthenticationV1().SelfSubjectReviews().Create(ctx, &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
	if err != nil || review.Status.UserInfo.Username != "system:serviceaccount:default:default" {
		t.Fatalf("s1's ServiceAccount token at s3: got %v, %v; want system:serviceaccount:default:default", review, err)
	}

	// A joined server restarts with its data directory, its --join and
	// all, while its --join target is down: it is a member already, so it
	// asks nothing and rejoins the two members that hold quorum.
	s1.Server.Stop()
	s3.Server.Stop()
	s3.Server.Start()
	b.WaitMembers(s3, "s1", "s2", "s3")
	s1.Server.Start()
	b.WaitMembers(s1, "s1", "s2", "s3")

	s4 := b.AddNode()
	b.Join(s4, "--leave")
	b.WaitMembers(s1, "s1", "s2", "s3", "s4")
	s4.Server.Stop()
	b.WaitMembers(s1, "s1", "s2", "s3")
	b.WaitMembers(s3, "s1", "s2", "s3")
}

// TestHAEtcdBadInput: a wrong token, a token pinned to another cluster's
// CA, a name already in the member list and a data directory of another
// cluster are each refused at start with a message saying what to do, and
// the cluster's member list stays as it was; a right join afterwards
// works.
func TestHAEtcdBadInput(t *testing.T) {
	b := newHABed(t, 4)
	s1, s2, s3, other := b.Nodes[0], b.Nodes[1], b.Nodes[2], b.Nodes[3]
	b.Init()
	b.Join(s2)
	// Another cluster, on the fourth node.
	other.Server = b.server(other, "--cluster-init")
	other.Server.Start()
	otherToken, err := os.ReadFile(filepath.Join(other.DataDir, "token"))
	if err != nil {
		t.Fatal(err)
	}
	join := []string{"--join", s1.URL()}
	for _, tc := range []struct {
		name    string
		dataDir string
		args    []string
		want    string
	}{
		{name: "wrong bare token", args: append(join, "--token", "not-the-secret"), want: "could not prove it knows the token"},
		{name: "right pin, wrong secret", args: append(join, "--token", strings.SplitN(b.Token, "::", 2)[0]+"::wrong"), want: "refused it; use the token"},
		{name: "token of another cluster", args: append(join, "--token", strings.TrimSpace(string(otherToken))), want: "not the one the join token pins"},
		{name: "name of a member", args: append(join, "--token", b.Token, "--hostname-override", "s2"), want: "s2\\\" is already in the cluster"},
		{name: "data directory of another cluster", dataDir: other.DataDir, args: append(join, "--token", b.Token), want: "holds the etcd data of another cluster"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := tc.dataDir
			if dir == "" {
				dir = t.TempDir()
			}
			if dir == other.DataDir {
				other.Server.Stop()
			}
			out := b.Refused(s3, dir, tc.args...)
			if !strings.Contains(out, tc.want) {
				t.Errorf("output: want %q in:\n%s", tc.want, tail(out, 5))
			}
			t.Logf("refused: %s", tail(out, 1))
			got, err := b.Members(s1)
			if err != nil || !slices.Equal(got, []string{"s1", "s2"}) {
				t.Errorf("member list after the refusal: got %v, %v; want [s1 s2]", got, err)
			}
		})
	}
	b.Join(s3)
	b.WaitMembers(s1, "s1", "s2", "s3")
}
