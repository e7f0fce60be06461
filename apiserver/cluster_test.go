package apiserver

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"portal.dev/portal/apiserver/clusterjoin"
)

func TestValidateCluster(t *testing.T) {
	for _, tc := range []struct {
		name    string
		o       Options
		wantErr string
	}{
		{name: "single server", o: Options{}},
		{name: "cluster-init", o: Options{Cluster: ClusterOptions{Init: true}}},
		{name: "join", o: Options{Cluster: ClusterOptions{Join: "https://10.0.0.1:6443", Token: "t"}}},
		{name: "external etcd", o: Options{EtcdServers: []string{"https://etcd:2379"}}},
		{name: "cluster-init with external etcd", o: Options{EtcdServers: []string{"https://etcd:2379"}, Cluster: ClusterOptions{Init: true}}, wantErr: "--etcd-servers"},
		{name: "join with external etcd", o: Options{EtcdServers: []string{"https://etcd:2379"}, Cluster: ClusterOptions{Join: "https://10.0.0.1:6443", Token: "t"}}, wantErr: "--etcd-servers"},
		{name: "leave with external etcd", o: Options{EtcdServers: []string{"https://etcd:2379"}, Cluster: ClusterOptions{Leave: true}}, wantErr: "--etcd-servers"},
		{name: "init and join", o: Options{Cluster: ClusterOptions{Init: true, Join: "https://10.0.0.1:6443", Token: "t"}}, wantErr: "only one"},
		{name: "join without token", o: Options{Cluster: ClusterOptions{Join: "https://10.0.0.1:6443"}}, wantErr: "--join needs --token"},
		{name: "join of a plain host", o: Options{Cluster: ClusterOptions{Join: "10.0.0.1", Token: "t"}}, wantErr: "https URL"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.o.ValidateCluster()
			switch {
			case tc.wantErr == "" && err != nil:
				t.Errorf("got error %v, want none", err)
			case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
				t.Errorf("got error %v, want one saying %q", err, tc.wantErr)
			}
		})
	}
}

func TestTokenFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(path, []byte("P10secret-from-a-file\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	o := Options{Cluster: ClusterOptions{Join: "https://10.0.0.1:6443", TokenFile: path}}
	if err := o.ValidateCluster(); err != nil || o.Cluster.Token != "P10secret-from-a-file" {
		t.Errorf("--token-file: got token %q, error %v; want the file's token", o.Cluster.Token, err)
	}
	if err := o.ValidateCluster(); err != nil {
		t.Errorf("validating again after the file was read: %v", err)
	}
	both := Options{Cluster: ClusterOptions{Join: "https://10.0.0.1:6443", Token: "t", TokenFile: path}}
	if err := both.ValidateCluster(); err == nil || !strings.Contains(err.Error(), "pass only one") {
		t.Errorf("--token and --token-file: got %v, want an error saying to pass only one", err)
	}
	missing := Options{Cluster: ClusterOptions{Join: "https://10.0.0.1:6443", TokenFile: path + ".gone"}}
	if err := missing.ValidateCluster(); err == nil || !strings.Contains(err.Error(), "--token-file") {
		t.Errorf("missing --token-file: got %v, want an error naming the flag", err)
	}
}

func TestInitialCluster(t *testing.T) {
	b := &clusterjoin.Bundle{MemberID: 3, Members: []clusterjoin.Member{
		{ID: 1, Name: "s1", PeerURLs: []string{"https://10.0.0.1:2380"}},
		{ID: 2, PeerURLs: []string{"https://10.0.0.2:2380"}},
		{ID: 3, PeerURLs: []string{"https://10.0.0.3:2380"}, Learner: true},
	}}
	got := initialCluster(b, "s3")
	want := "s1=https://10.0.0.1:2380,unstarted-2=https://10.0.0.2:2380,s3=https://10.0.0.3:2380"
	if got != want {
		t.Errorf("got %s, want %s", got, want)
	}
}
