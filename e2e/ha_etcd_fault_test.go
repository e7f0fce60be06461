package e2e

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// haWriters create Services (NodePort, so each takes a cluster IP and a
// node port) and ConfigMaps, in turn, each writer through one server,
// and remember every write the API acknowledged and when.
type haWriters struct {
	mu    sync.Mutex
	acked []string // "svc/NAME" or "cm/NAME"
	okAt  []time.Time
	fails int
	stop  chan struct{}
	wg    sync.WaitGroup
}

// startWriters starts n writers, the i-th writing through clients[i%len].
func startWriters(n int, clients []kubernetes.Interface) *haWriters {
	w := &haWriters{stop: make(chan struct{})}
	for i := range n {
		c := clients[i%len(clients)]
		w.wg.Add(1)
		go func() {
			defer w.wg.Done()
			for seq := 0; ; seq++ {
				select {
				case <-w.stop:
					return
				default:
				}
				name := fmt.Sprintf("w%d-%d", i, seq)
				key, err := "cm/"+name, error(nil)
				ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
				if seq%2 == 0 {
					key = "svc/" + name
					svc := service(name)
					svc.Spec.Type = corev1.ServiceTypeNodePort
					_, err = c.CoreV1().Services("default").Create(ctx, svc, metav1.CreateOptions{})
				} else {
					_, err = c.CoreV1().ConfigMaps("default").Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
				}
				cancel()
				w.mu.Lock()
				if err == nil {
					w.acked = append(w.acked, key)
					w.okAt = append(w.okAt, time.Now())
				} else {
					w.fails++
				}
				w.mu.Unlock()
				if err != nil {
					time.Sleep(50 * time.Millisecond)
				}
			}
		}()
	}
	return w
}

// Stop stops the writers and waits for them.
func (w *haWriters) Stop() {
	close(w.stop)
	w.wg.Wait()
}

// succeeded is how many writes the API acknowledged so far.
func (w *haWriters) succeeded() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.acked)
}

// longestGapAfter is the longest time after since without an acknowledged
// write: from since to the first one, or between two.
func (w *haWriters) longestGapAfter(since time.Time) time.Duration {
	w.mu.Lock()
	times := slices.Clone(w.okAt)
	w.mu.Unlock()
	slices.SortFunc(times, time.Time.Compare)
	var gap time.Duration
	prev := since
	for _, at := range times {
		if at.Before(since) {
			continue
		}
		gap = max(gap, at.Sub(prev))
		prev = at
	}
	return gap
}

// checkWrites fails the test unless every acknowledged write is in the
// API c reaches and no two Services share a cluster IP or a node port.
func checkWrites(t *testing.T, c kubernetes.Interface, w *haWriters) {
	t.Helper()
	ctx := context.Background()
	svcs, err := c.CoreV1().Services("").List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cms, err := c.CoreV1().ConfigMaps("default").List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	have := map[string]bool{}
	ips, ports := map[string]string{}, map[int32]string{}
	// A duplicate names each Service with whether its create was
	// acknowledged and when it was stored: a create that failed but
	// landed is the usual suspect.
	w.mu.Lock()
	ackedSvc := map[string]bool{}
	for _, k := range w.acked {
		ackedSvc[k] = true
	}
	w.mu.Unlock()
	for _, s := range svcs.Items {
		have["svc/"+s.Name] = true
		self := fmt.Sprintf("%s/%s (acknowledged %v, created %s)", s.Namespace, s.Name, ackedSvc["svc/"+s.Name],
			s.CreationTimestamp.Format(time.TimeOnly))
		for _, ip := range s.Spec.ClusterIPs {
			if other, dup := ips[ip]; dup && ip != "None" {
				t.Errorf("cluster IP %s given twice: to %s and %s", ip, other, self)
			}
			ips[ip] = self
		}
		for _, p := range s.Spec.Ports {
			if p.NodePort == 0 {
				continue
			}
			if other, dup := ports[p.NodePort]; dup {
				t.Errorf("node port %d given twice: to %s and %s", p.NodePort, other, self)
			}
			ports[p.NodePort] = self
		}
	}
	for _, cm := range cms.Items {
		have["cm/"+cm.Name] = true
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	missing := 0
	for _, k := range w.acked {
		if !have[k] {
			missing++
			if missing <= 5 {
				t.Errorf("acknowledged write %s is gone", k)
			}
		}
	}
	if missing > 0 {
		t.Errorf("%d of %d acknowledged writes are gone", missing, len(w.acked))
	}
	t.Logf("%d acknowledged writes all present; %d Services with %d cluster IPs and %d node ports, none twice",
		len(w.acked)-missing, len(svcs.Items), len(ips), len(ports))
}

// TestHAEtcdLeaderKilled: kill -9 of the node whose etcd member leads, while
// 6 writers create Services and ConfigMaps through the other servers:
// writes stop for a few seconds at most, every acknowledged write is there
// afterwards, no cluster IP or node port is given twice, and the killed
// node rejoins when restarted.
func TestHAEtcdLeaderKilled(t *testing.T) {
	b := newHABed(t, 3)
	b.Start()
	worker := b.AddWorker()
	load := worker.StartLoad()
	defer load.Stop()
	leader := b.Leader(b.Nodes[0])
	var clients []kubernetes.Interface
	for _, n := range b.Nodes {
		if n != leader {
			clients = append(clients, b.clientAt(n, n))
		}
	}
	w := startWriters(6, clients)
	defer func() {
		select {
		case <-w.stop:
		default:
			w.Stop()
		}
	}()
	waitFor(t, 30*time.Second, func() bool { return w.succeeded() >= 60 })
	leader.Server.Kill()
	killed := time.Now()
	before := w.succeeded()
	t.Logf("killed %s, the etcd leader, after %d acknowledged writes", leader.Name, before)
	waitFor(t, 60*time.Second, func() bool { return w.succeeded() >= before+120 })
	w.Stop()
	gap := w.longestGapAfter(killed)
	t.Logf("writes unavailable after the etcd leader's kill: %v (%d writes failed)", gap.Round(10*time.Millisecond), w.fails)
	if gap > 5*time.Second {
		t.Errorf("writes unavailable for %v after the leader's kill, want at most 5 s", gap)
	}
	checkWrites(t, clients[0], w)

	leader.Server.Start()
	var names []string
	for _, n := range b.Nodes {
		names = append(names, n.Name)
	}
	b.WaitMembers(leader, names...)
	// The restarted node serves what was written while it was down.
	w.mu.Lock()
	last := w.acked[len(w.acked)-1]
	w.mu.Unlock()
	kind, name, _ := strings.Cut(last, "/")
	c := b.clientAt(leader, leader)
	eventually(t, "the restarted node serves "+last, func() (bool, string) {
		var err error
		if kind == "svc" {
			_, err = c.CoreV1().Services("default").Get(context.Background(), name, metav1.GetOptions{})
		} else {
			_, err = c.CoreV1().ConfigMaps("default").Get(context.Background(), name, metav1.GetOptions{})
		}
		return err == nil, fmt.Sprint(err)
	})
	// The data plane never needed etcd: the worker's rules stayed.
	load.CheckNoFailures(t, 20)
}

// TestHAEtcdPartition: nftables rules cut the node whose etcd member leads
// off the others while 6 writers write through the others. The majority
// keeps acknowledging writes; the isolated server refuses a Service with
// an error within the request timeout and allocates nothing for it; once
// healed it rejoins and serves the majority's writes, and no cluster IP or
// node port is given twice.
func TestHAEtcdPartition(t *testing.T) {
	b := newHABed(t, 3)
	b.Start()
	worker := b.AddWorker()
	load := worker.StartLoad()
	defer load.Stop()
	iso := b.Leader(b.Nodes[0])
	var clients []kubernetes.Interface
	for _, n := range b.Nodes {
		if n != iso {
			clients = append(clients, b.clientAt(n, n))
		}
	}
	w := startWriters(6, clients)
	defer func() {
		select {
		case <-w.stop:
		default:
			w.Stop()
		}
	}()
	waitFor(t, 30*time.Second, func() bool { return w.succeeded() >= 30 })
	b.Isolate(iso)
	isolated := time.Now()
	before := w.succeeded()
	waitFor(t, 60*time.Second, func() bool { return w.succeeded() >= before+60 })
	t.Logf("majority acknowledged %d writes in %v after %s, the etcd leader, was cut off (longest gap %v)",
		w.succeeded()-before, time.Since(isolated).Round(100*time.Millisecond), iso.Name, w.longestGapAfter(isolated).Round(10*time.Millisecond))

	cfg := iso.Server.RESTConfig()
	cfg.Host, cfg.Dial, cfg.Timeout = iso.URL(), iso.NS.DialContext, 70*time.Second
	isoClient := kubernetes.NewForConfigOrDie(cfg)
	svc := service("on-the-isolated-server")
	svc.Spec.Type = corev1.ServiceTypeNodePort
	// Reads go on meanwhile: the isolated server must not answer from
	// what its member held when it was cut off.
	reads := make(chan string, 1)
	go func() { reads <- checkQuorumReads(t, isoClient, clients[0], w, before) }()
	start := time.Now()
	_, err := isoClient.CoreV1().Services("default").Create(context.Background(), svc, metav1.CreateOptions{})
	took := time.Since(start)
	if err == nil {
		t.Fatal("the isolated server acknowledged a Service create")
	}
	t.Logf("the isolated server refused the create after %v: %v", took.Round(10*time.Millisecond), err)
	if took > 65*time.Second {
		t.Errorf("the isolated server took %v to refuse, want an error within the request timeout (60 s)", took)
	}
	// The Service is fine; its storage is not: a 5xx the client retries,
	// not a 422 that blames the spec.
	if status := apierrors.APIStatus(nil); !errors.As(err, &status) || status.Status().Code < 500 {
		t.Errorf("the isolated server refused the create with %v, want a 5xx storage error", err)
	}

	read := <-reads
	t.Logf("reads through the isolated server, done %v after the create began: %s", time.Since(start).Round(100*time.Millisecond), read)

	b.Heal(iso)
	healedAt := time.Now()
	var names []string
	for _, n := range b.Nodes {
		names = append(names, n.Name)
	}
	b.WaitMembers(iso, names...)
	healed := b.clientAt(iso, iso)
	eventually(t, "a write through the healed server", func() (bool, string) {
		_, err := healed.CoreV1().ConfigMaps("default").Create(context.Background(),
			&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{GenerateName: "after-heal-"}}, metav1.CreateOptions{})
		return err == nil, fmt.Sprint(err)
	})
	w.Stop()
	t.Logf("the healed server took a write %v after the heal", time.Since(healedAt).Round(100*time.Millisecond))
	// The healed server allocates from the cluster's state, not from what
	// it held while cut off: checkWrites sees these next to the majority's.
	// They take cluster IPs only; on a slow machine the writers may have
	// taken every node port by now.
	for i := range 5 {
		svc := service(fmt.Sprintf("after-heal-%d", i))
		if _, err := healed.CoreV1().Services("default").Create(context.Background(), svc, metav1.CreateOptions{}); err != nil {
			t.Errorf("create a Service through the healed server: %v", err)
		}
	}
	checkWrites(t, healed, w)
	if _, err := healed.CoreV1().Services("default").Get(context.Background(), svc.Name, metav1.GetOptions{}); err == nil {
		t.Errorf("the Service the isolated server refused exists after healing")
	}
	load.CheckNoFailures(t, 20)
}

// checkQuorumReads reads, through iso, the last Service and ConfigMap the
// majority acknowledged after the first since writes, one at a time by
// name and in lists. Every read must fail or be current: an object
// missing, or a Service with another cluster IP or node port than the
// majority gave it, is a stale answer. It returns what each read got.
func checkQuorumReads(t *testing.T, iso, majority kubernetes.Interface, w *haWriters, since int) string {
	w.mu.Lock()
	var lastSvc, lastCM string
	for _, k := range w.acked[since:] {
		if name, ok := strings.CutPrefix(k, "svc/"); ok {
			lastSvc = name
		} else {
			lastCM = strings.TrimPrefix(k, "cm/")
		}
	}
	w.mu.Unlock()
	if lastSvc == "" || lastCM == "" {
		t.Errorf("no Service or no ConfigMap acknowledged since the cut (%q, %q)", lastSvc, lastCM)
		return "not checked"
	}
	ctx := context.Background()
	want, err := majority.CoreV1().Services("default").Get(ctx, lastSvc, metav1.GetOptions{})
	if err != nil {
		t.Errorf("the majority's own Service %s: %v", lastSvc, err)
		return "not checked"
	}
	// Each read waits out etcd's request timeout when it fails: they go
	// together.
	reads := []struct {
		what string
		do   func() (current bool, err error)
	}{
		{"get svc/" + lastSvc, func() (bool, error) {
			svc, err := iso.CoreV1().Services("default").Get(ctx, lastSvc, metav1.GetOptions{})
			return err == nil && svc.Spec.ClusterIP == want.Spec.ClusterIP && svc.Spec.Ports[0].NodePort == want.Spec.Ports[0].NodePort, err
		}},
		{"get cm/" + lastCM, func() (bool, error) {
			_, err := iso.CoreV1().ConfigMaps("default").Get(ctx, lastCM, metav1.GetOptions{})
			return err == nil, err
		}},
		{"list services", func() (bool, error) {
			svcs, err := iso.CoreV1().Services("default").List(ctx, metav1.ListOptions{})
			return err == nil && slices.ContainsFunc(svcs.Items, func(s corev1.Service) bool {
				return s.Name == lastSvc && s.Spec.ClusterIP == want.Spec.ClusterIP
			}), err
		}},
		{"list configmaps", func() (bool, error) {
			cms, err := iso.CoreV1().ConfigMaps("default").List(ctx, metav1.ListOptions{})
			return err == nil && slices.ContainsFunc(cms.Items, func(c corev1.ConfigMap) bool { return c.Name == lastCM }), err
		}},
	}
	got := make([]string, len(reads))
	var wg sync.WaitGroup
	for i, r := range reads {
		wg.Go(func() {
			current, err := r.do()
			switch {
			case apierrors.IsNotFound(err), err == nil && !current:
				t.Errorf("%s through the isolated server: stale (%v), want an error or the majority's state", r.what, err)
				got[i] = r.what + " stale"
			case err != nil:
				got[i] = fmt.Sprintf("%s refused (%.80s)", r.what, err)
			default:
				got[i] = r.what + " current"
			}
		})
	}
	wg.Wait()
	return strings.Join(got, "; ")
}
