//go:build linux

package agent

import (
	"context"
	"net/netip"
	"sync"
	"syscall"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"

	"portal.dev/portal/agent/container"
	"portal.dev/portal/agent/podnet"
)

// fakeProc is a pod process that exits when told to, or on a signal.
type fakeProc struct {
	pid        int
	spec       container.Spec
	ignoreTerm bool // stays up on SIGTERM, as a slow shutdown would

	done chan struct{}
	once sync.Once
	mu   sync.Mutex
	code int
	sigs []syscall.Signal
}

func (p *fakeProc) ID() (int, uint64)     { return p.pid, 1 }
func (p *fakeProc) Done() <-chan struct{} { return p.done }

func (p *fakeProc) ExitCode() (int, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.code, true
}

func (p *fakeProc) Signal(sig syscall.Signal) error {
	p.mu.Lock()
	p.sigs = append(p.sigs, sig)
	p.mu.Unlock()
	if sig == syscall.SIGKILL || (sig == syscall.SIGTERM && !p.ignoreTerm) {
		p.exit(128 + int(sig))
	}
	return nil
}

func (p *fakeProc) GroupGone() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// exit ends the process with code (the first end wins).
func (p *fakeProc) exit(code int) {
	p.once.Do(func() {
		p.mu.Lock()
		p.code = code
		p.mu.Unlock()
		close(p.done)
	})
}

func (p *fakeProc) signals() []syscall.Signal {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]syscall.Signal(nil), p.sigs...)
}

// fakeRuntime starts fakeProcs and remembers them.
type fakeRuntime struct {
	ignoreTerm bool
	started    chan *fakeProc // each container start, when not nil

	mu    sync.Mutex
	procs []*fakeProc
}

func (r *fakeRuntime) Start(spec container.Spec) (Process, error) {
	r.mu.Lock()
	p := &fakeProc{pid: 1000 + len(r.procs), spec: spec, ignoreTerm: r.ignoreTerm, done: make(chan struct{})}
	r.procs = append(r.procs, p)
	r.mu.Unlock()
	if r.started != nil && !spec.Pause {
		r.started <- p
	}
	return p, nil
}

func (r *fakeRuntime) Run(context.Context, container.Spec, []byte) (int, []byte, error) {
	return 0, nil, nil
}

func (r *fakeRuntime) Adopt(int, uint64) (Process, bool) { return nil, false }

// containers are the container runs started so far, oldest first.
func (r *fakeRuntime) containers() []*fakeProc {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []*fakeProc
	for _, p := range r.procs {
		if !p.spec.Pause {
			out = append(out, p)
		}
	}
	return out
}

// sandboxes are the sandboxes started so far.
func (r *fakeRuntime) sandboxes() []*fakeProc {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []*fakeProc
	for _, p := range r.procs {
		if p.spec.Pause {
			out = append(out, p)
		}
	}
	return out
}

// exitAll ends every process, so nothing waits on one after a test.
func (r *fakeRuntime) exitAll() {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, p := range r.procs {
		p.exit(137)
	}
}

// fakeNetwork gives every pod the same address.
type fakeNetwork struct {
	mu       sync.Mutex
	detached []string
}

func (n *fakeNetwork) Setup(context.Context) error                    { return nil }
func (n *fakeNetwork) SyncPeers(context.Context, []podnet.Peer) error { return nil }
func (n *fakeNetwork) Owners() []string                               { return nil }

func (n *fakeNetwork) Attach(context.Context, string, int) ([]netip.Addr, error) {
	return []netip.Addr{netip.MustParseAddr("10.244.0.5")}, nil
}

func (n *fakeNetwork) Detach(_ context.Context, id string) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.detached = append(n.detached, id)
	return nil
}

func (n *fakeNetwork) detachedIDs() []string {
	n.mu.Lock()
	defer n.mu.Unlock()
	return append([]string(nil), n.detached...)
}

// testAgent is an agent on node n1 with a fake API, runtime and network.
func testAgent(t *testing.T, rtm *fakeRuntime, objs ...*corev1.Pod) (*Agent, *fake.Clientset, *fakeNetwork) {
	t.Helper()
	client := fake.NewSimpleClientset()
	for _, p := range objs {
		if _, err := client.CoreV1().Pods(p.Namespace).Create(context.Background(), p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	fn := &fakeNetwork{}
	a, err := New(client, Options{NodeName: "n1", RootDir: t.TempDir(), NodeIPs: []netip.Addr{netip.MustParseAddr("192.168.0.1")},
		PodCIDRs: []netip.Prefix{netip.MustParsePrefix("10.244.0.0/24")}, InitPath: "/bin/true", ClusterDomain: "cluster.local",
		Runtime: rtm, NewNetwork: func(NetworkConfig) Network { return fn }})
	if err != nil {
		t.Fatal(err)
	}
	return a, client, fn
}

// sleeper is a pod on n1 with one container, app, that runs until stopped.
func sleeper(name string, policy corev1.RestartPolicy) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", UID: types.UID("uid-" + name)},
		Spec: corev1.PodSpec{NodeName: "n1", RestartPolicy: policy,
			Containers: []corev1.Container{{Name: "app", Command: []string{"sleep", "3600"}}}}}
}
