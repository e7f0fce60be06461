package embeddedetcd

import (
	"net"
	"testing"
)

// A single member has no followers to catch up, so it keeps few applied
// raft entries in memory; a member of a cluster of servers keeps etcd's
// default for its followers.
func TestCatchUpEntries(t *testing.T) {
	tests := []struct {
		name    string
		cluster *Cluster
		want    uint64
	}{
		{name: "single member", want: singleMemberCatchUpEntries},
		{name: "member of a cluster", cluster: &Cluster{Name: "s1", AdvertiseIP: net.IPv4(127, 0, 0, 1), PeerPort: freePort(t)}, want: 5000},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s, err := StartMember(t.Context(), t.TempDir(), tc.cluster)
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			if got := s.etcd.Server.Cfg.SnapshotCatchUpEntries; got != tc.want {
				t.Errorf("got %d catch-up entries, want %d", got, tc.want)
			}
		})
	}
}

func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}
