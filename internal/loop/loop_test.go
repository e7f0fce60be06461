package loop

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/go-logr/logr/funcr"
	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"
)

// recorder counts the syncs of each key and fails them as told.
type recorder struct {
	mu    sync.Mutex
	syncs map[string]int
	fail  func(key string, n int) error // n: this key's sync count, from 1
}

func (r *recorder) sync(_ context.Context, key string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.syncs == nil {
		r.syncs = map[string]int{}
	}
	r.syncs[key]++
	if r.fail != nil {
		return r.fail(key, r.syncs[key])
	}
	return nil
}

func (r *recorder) count(key string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.syncs[key]
}

// fastRetries retries every 10 ms, so fake time moves little.
func fastRetries() workqueue.TypedRateLimiter[string] {
	return workqueue.NewTypedItemExponentialFailureRateLimiter[string](10*time.Millisecond, 10*time.Millisecond)
}

// start runs l until the returned stop is called; stop waits for Run.
func start(l *Loop[string]) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		l.Run(ctx, 2)
	}()
	return func() { cancel(); <-done }
}

func TestRetries(t *testing.T) {
	errBoom := errors.New("boom")
	tests := []struct {
		name       string
		maxRetries int
		fail       func(key string, n int) error
		wantSyncs  int
	}{
		{"success syncs once", 0, nil, 1},
		{"a failure is retried until it succeeds", 0,
			func(_ string, n int) error { return errIf(n < 4, errBoom) }, 4},
		{"MaxRetries drops the key after that many retries", 3,
			func(string, int) error { return errBoom }, 4},
		{"RetryAfter does not count towards MaxRetries", 1,
			func(_ string, n int) error { return errIf(n < 5, RetryAfter(time.Millisecond, errBoom)) }, 5},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				r := &recorder{fail: tc.fail}
				l := New(Config[string]{Name: "test", Sync: r.sync, MaxRetries: tc.maxRetries, RateLimiter: fastRetries()})
				stop := start(l)
				defer stop()
				l.Add("a")
				time.Sleep(time.Second) // fake time: every retry is due long before
				synctest.Wait()
				if got := r.count("a"); got != tc.wantSyncs {
					t.Errorf("got %d syncs, want %d", got, tc.wantSyncs)
				}
			})
		})
	}
}

func errIf(cond bool, err error) error {
	if cond {
		return err
	}
	return nil
}

func TestAddAfterWaits(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := &recorder{}
		l := New(Config[string]{Name: "test", Sync: r.sync})
		defer start(l)()
		l.AddAfter("a", time.Minute)
		time.Sleep(59 * time.Second)
		synctest.Wait()
		if got := r.count("a"); got != 0 {
			t.Fatalf("synced %d times before the delay passed, want 0", got)
		}
		time.Sleep(2 * time.Second)
		synctest.Wait()
		if got := r.count("a"); got != 1 {
			t.Fatalf("got %d syncs after the delay, want 1", got)
		}
	})
}

func TestObserveSeesEverySync(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var mu sync.Mutex
		var results []error
		errBoom := errors.New("boom")
		r := &recorder{fail: func(_ string, n int) error { return errIf(n == 1, errBoom) }}
		l := New(Config[string]{Name: "test", Sync: r.sync, RateLimiter: fastRetries(),
			Observe: func(_ time.Duration, err error) { mu.Lock(); results = append(results, err); mu.Unlock() }})
		defer start(l)()
		l.Add("a")
		time.Sleep(time.Second)
		synctest.Wait()
		mu.Lock()
		defer mu.Unlock()
		if want := []error{errBoom, nil}; !slices.Equal(results, want) {
			t.Errorf("observed %v, want %v", results, want)
		}
	})
}

// TestRunWaitsForCachesAndStopsEverything follows one Loop through its
// life: nothing syncs before the watched informer has listed, Start sees
// the listed objects, and once Run returns its handler gets no more
// events and its background function has returned.
func TestRunWaitsForCachesAndStopsEverything(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := t.Context()
		client := fake.NewClientset(&corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "old"}})
		factory := informers.NewSharedInformerFactory(client, 0)
		inf := factory.Core().V1().Services().Informer()

		r := &recorder{}
		var startSaw []string
		backgroundDone := make(chan struct{})
		var l *Loop[string]
		l = New(Config[string]{
			Name: "test",
			Sync: r.sync,
			Start: func(context.Context) error {
				startSaw = inf.GetStore().ListKeys()
				return nil
			},
			Background: []func(context.Context){func(ctx context.Context) {
				<-ctx.Done()
				close(backgroundDone)
			}},
		})
		var events sync.Map
		if err := l.Watch(inf, cache.ResourceEventHandlerFuncs{AddFunc: func(obj any) {
			if key, ok := Key(obj); ok {
				events.Store(key, true)
				l.Add(key)
			}
		}}); err != nil {
			t.Fatal(err)
		}

		runCtx, cancel := context.WithCancel(ctx)
		done := make(chan struct{})
		go func() { defer close(done); l.Run(runCtx, 1) }()
		defer func() { cancel(); <-done }()
		time.Sleep(time.Second)
		synctest.Wait()
		if l.HasSynced() || startSaw != nil {
			t.Fatal("the Loop reports synced (or ran Start) before the informer started")
		}
		factoryCtx, stopFactory := context.WithCancel(ctx)
		factory.Start(factoryCtx.Done())
		defer func() { stopFactory(); factory.Shutdown() }()
		time.Sleep(time.Second) // the cache-sync poll's period, in fake time
		synctest.Wait()
		if !l.HasSynced() {
			t.Fatal("not synced after the informer listed")
		}
		if want := []string{"ns/old"}; !slices.Equal(startSaw, want) {
			t.Errorf("Start saw %v, want %v", startSaw, want)
		}
		if got := r.count("ns/old"); got != 1 {
			t.Errorf("ns/old synced %d times, want 1", got)
		}

		cancel()
		<-done
		select {
		case <-backgroundDone:
		default:
			t.Error("Run returned before its background function")
		}
		_, err := client.CoreV1().Services("ns").Create(ctx,
			&corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "new"}}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		if _, ok := events.Load("ns/new"); ok {
			t.Error("the handler still got events after Run returned")
		}
	})
}

func TestStartErrorEndsRun(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := &recorder{}
		l := New(Config[string]{Name: "test", Sync: r.sync,
			Start: func(context.Context) error { return errors.New("cannot rebuild") }})
		l.Add("a")
		done := make(chan struct{})
		go func() { defer close(done); l.Run(t.Context(), 1) }()
		time.Sleep(time.Second) // HandleError may pause a little after an error
		synctest.Wait()
		select {
		case <-done:
		default:
			t.Fatal("Run still runs after Start failed")
		}
		if got := r.count("a"); got != 0 {
			t.Errorf("synced %d times after Start failed, want 0", got)
		}
	})
}

// TestCollectRegistersWhileRunning pins the leadership case: a controller
// built again after its Loop stopped registers the same metric names
// without a duplicate-registration error.
func TestCollectRegistersWhileRunning(t *testing.T) {
	reg := prometheus.NewPedanticRegistry()
	for term := range 2 {
		synctest.Test(t, func(t *testing.T) {
			g := prometheus.NewGauge(prometheus.GaugeOpts{Name: "test_depth", Help: "Depth."})
			l := New(Config[string]{Name: "test", Sync: (&recorder{}).sync})
			l.Collect(reg, g)
			stop := start(l)
			synctest.Wait()
			if n := gathered(t, reg); n != 1 {
				t.Errorf("term %d: %d metric families while running, want 1", term, n)
			}
			stop()
			if n := gathered(t, reg); n != 0 {
				t.Errorf("term %d: %d metric families after Run returned, want 0", term, n)
			}
		})
	}
}

func gathered(t *testing.T, g prometheus.Gatherer) int {
	t.Helper()
	mfs, err := g.Gather()
	if err != nil {
		t.Fatal(err)
	}
	return len(mfs)
}

func TestFromTombstone(t *testing.T) {
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "a"}}
	tests := []struct {
		name string
		obj  any
		ok   bool
	}{
		{"the object itself", svc, true},
		{"wrapped in a tombstone", cache.DeletedFinalStateUnknown{Key: "ns/a", Obj: svc}, true},
		{"another type", &corev1.Pod{}, false},
		{"a tombstone of another type", cache.DeletedFinalStateUnknown{Key: "ns/a", Obj: &corev1.Pod{}}, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := FromTombstone[*corev1.Service](tc.obj)
			if ok != tc.ok || (ok && got != svc) {
				t.Errorf("got %v, %v; want the service: %v", got, ok, tc.ok)
			}
		})
	}
}

// TestSyncNowInStartKeepsOrderAndRetries pins what a Start pass relies
// on: keys synced through SyncNow run in the order given, before any
// worker, and a failed one is retried by the workers with back-off.
func TestSyncNowInStartKeepsOrderAndRetries(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var mu sync.Mutex
		var order []string
		errBoom := errors.New("boom")
		var l *Loop[string]
		l = New(Config[string]{
			Name:        "test",
			RateLimiter: fastRetries(),
			Sync: func(_ context.Context, key string) error {
				mu.Lock()
				defer mu.Unlock()
				order = append(order, key)
				return errIf(key == "b" && len(order) == 2, errBoom)
			},
			Start: func(ctx context.Context) error {
				for _, k := range []string{"c", "b", "a"} {
					l.SyncNow(ctx, k)
				}
				return nil
			},
		})
		l.Add("queued")
		defer start(l)()
		time.Sleep(time.Second)
		synctest.Wait()
		mu.Lock()
		defer mu.Unlock()
		if want := []string{"c", "b", "a"}; len(order) < 3 || !slices.Equal(order[:3], want) {
			t.Errorf("first syncs %v, want %v before any worker", order, want)
		}
		if want := []string{"b", "queued"}; len(order) != 5 || !slices.Equal(slices.Sorted(slices.Values(order[3:])), want) {
			t.Errorf("syncs %v, want %v synced by the workers after the Start pass", order, want)
		}
	})
}

// TestReportFailures: with ReportFailures a failed sync is logged as an
// error, except a conflict, which the retry settles; without it no
// failure is.
func TestReportFailures(t *testing.T) {
	conflict := apierrors.NewConflict(schema.GroupResource{Resource: "services"}, "a", errors.New("changed"))
	for _, tc := range []struct {
		name       string
		report     bool
		err        error
		wantErrors int
	}{
		{"reported", true, errors.New("boom"), 1},
		{"a conflict is not", true, conflict, 0},
		{"not asked", false, errors.New("boom"), 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				var mu sync.Mutex
				errorsLogged := 0
				logger := funcr.New(func(prefix, args string) {
					if strings.Contains(args, `"error"`) {
						mu.Lock()
						errorsLogged++
						mu.Unlock()
					}
				}, funcr.Options{})
				r := &recorder{fail: func(_ string, n int) error { return errIf(n == 1, tc.err) }}
				l := New(Config[string]{Name: "test", Sync: r.sync, ReportFailures: tc.report, RateLimiter: fastRetries()})
				ctx, cancel := context.WithCancel(klog.NewContext(context.Background(), logger))
				done := make(chan struct{})
				go func() { defer close(done); l.Run(ctx, 1) }()
				l.Add("a")
				time.Sleep(time.Second)
				synctest.Wait()
				cancel()
				<-done
				mu.Lock()
				defer mu.Unlock()
				if errorsLogged != tc.wantErrors {
					t.Errorf("got %d errors logged, want %d", errorsLogged, tc.wantErrors)
				}
			})
		})
	}
}

// TestWatchOrLogReportsAStoppedInformer: a handler that cannot be added
// is logged as an error naming the controller. Not in a synctest bubble:
// HandleError's back-off reads the real clock's start time.
func TestWatchOrLogReportsAStoppedInformer(t *testing.T) {
	var mu sync.Mutex
	var logged []string
	klog.SetLogger(funcr.New(func(_, args string) {
		mu.Lock()
		defer mu.Unlock()
		logged = append(logged, args)
	}, funcr.Options{}))
	defer klog.ClearLogger()

	factory := informers.NewSharedInformerFactory(fake.NewClientset(), 0)
	inf := factory.Core().V1().Services().Informer()
	ctx, stopFactory := context.WithCancel(t.Context())
	factory.Start(ctx.Done())
	stopFactory()
	factory.Shutdown()

	l := New(Config[string]{Name: "test", Sync: (&recorder{}).sync})
	l.WatchOrLog(inf, cache.ResourceEventHandlerFuncs{})
	mu.Lock()
	defer mu.Unlock()
	if !slices.ContainsFunc(logged, func(s string) bool { return strings.Contains(s, "test: add event handler") }) {
		t.Errorf("got log %q, want an error naming the controller's handler", logged)
	}
}
