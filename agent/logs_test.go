//go:build linux

package agent

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"

	"portal.dev/portal/pki"
)

// TestLogEndpointOnlyAPIServer: the log endpoint serves the API server's
// client certificate and refuses every other certificate the cluster CA
// signed (an administrator's, a node's) with 403. It used to serve any
// certificate of the CA, so any node could read every other node's logs.
func TestLogEndpointOnlyAPIServer(t *testing.T) {
	ca, err := pki.LoadOrCreateCA(t.TempDir(), "ca")
	if err != nil {
		t.Fatal(err)
	}
	other, err := pki.LoadOrCreateCA(t.TempDir(), "other")
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(ca.CertPEM)
	srv := httptest.NewUnstartedServer(onlyUser(pki.APIServerAgentClientUser, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "log line\n")
	})))
	srv.TLS = &tls.Config{ClientCAs: pool, ClientAuth: tls.RequireAndVerifyClientCert}
	srv.StartTLS()
	defer srv.Close()

	for _, tc := range []struct {
		name   string
		ca     *pki.CA
		user   string
		groups []string
		want   int // 0: the TLS handshake fails
	}{
		{"the API server", ca, pki.APIServerAgentClientUser, nil, http.StatusOK},
		{"an administrator", ca, "admin", []string{"system:masters"}, http.StatusForbidden},
		{"another node", ca, "system:node:node2", []string{"system:nodes"}, http.StatusForbidden},
		{"the API server's name from another CA", other, pki.APIServerAgentClientUser, nil, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			certPEM, keyPEM, err := tc.ca.IssueClient(tc.user, tc.groups)
			if err != nil {
				t.Fatal(err)
			}
			cert, err := tls.X509KeyPair(certPEM, keyPEM)
			if err != nil {
				t.Fatal(err)
			}
			c := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{
				Certificates: []tls.Certificate{cert}, InsecureSkipVerify: true}}}
			resp, err := c.Get(srv.URL + "/containerLogs/default/web/main")
			got := 0
			if err == nil {
				got = resp.StatusCode
				resp.Body.Close()
			}
			if got != tc.want {
				t.Errorf("got status %d (err %v), want %d", got, err, tc.want)
			}
		})
	}
}

// logBed is an agent serving the logs of pod default/web, whose container
// main ran once (old-1, old-2) and now runs again (line-1 to line-3),
// started an hour ago.
type logBed struct {
	mux            *http.ServeMux
	dir            string
	started, prior time.Time
}

func newLogBed(t *testing.T) *logBed {
	t.Helper()
	b := &logBed{dir: t.TempDir(), started: time.Now().Add(-time.Hour).Truncate(time.Second)}
	b.prior = b.started.Add(-time.Hour)
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "web", UID: "0123456789ab"}}
	pod.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "main", RestartCount: 1,
		ContainerID: ctrID(pod.UID, "main", 1),
		State:       corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: metav1.NewTime(b.started)}},
		LastTerminationState: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{
			ContainerID: ctrID(pod.UID, "main", 0), StartedAt: metav1.NewTime(b.prior), FinishedAt: metav1.NewTime(b.started)}}}}
	pod.Status.InitContainerStatuses = []corev1.ContainerStatus{{Name: "setup", ContainerID: ctrID(pod.UID, "setup", 0),
		State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{
			ContainerID: ctrID(pod.UID, "setup", 0), StartedAt: metav1.NewTime(b.prior), FinishedAt: metav1.NewTime(b.prior)}}}}
	indexer := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
	indexer.Add(pod)
	a := &Agent{opts: Options{RootDir: b.dir, NodeName: "node1"}, pods: corelisters.NewPodLister(indexer)}
	logs := filepath.Join(a.podDir(pod.UID), "logs", "main")
	if err := os.MkdirAll(logs, 0o755); err != nil {
		t.Fatal(err)
	}
	// side ran once, but the status does not say so (yet).
	if err := os.MkdirAll(filepath.Join(logs, "..", "side"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(logs, "..", "setup"), 0o755); err != nil {
		t.Fatal(err)
	}
	b.dir = logs
	b.write(t, "../side/0.log", "side-1\n")
	b.write(t, "../setup/0.log", "setup-1\n")
	b.write(t, "0.log", "old-1\nold-2\n")
	b.write(t, "1.log", "line-1\nline-2\nline-3\n")
	b.mux = http.NewServeMux()
	b.mux.HandleFunc("GET /containerLogs/{namespace}/{pod}/{container}", a.containerLogs)
	return b
}

// write appends data to the log file name.
func (b *logBed) write(t *testing.T, name, data string) {
	t.Helper()
	f, err := os.OpenFile(filepath.Join(b.dir, name), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteString(data); err != nil {
		t.Fatal(err)
	}
}

// TestContainerLogOptions: the agent honours limitBytes and the since
// options it can answer exactly, and refuses the others naming the field.
// It used to ignore limitBytes, sinceSeconds, sinceTime and timestamps, so
// `kubectl logs --limit-bytes`, `--since` and `--timestamps` printed the
// whole log as if asked for it.
func TestContainerLogOptions(t *testing.T) {
	b := newLogBed(t)
	rfc := func(t time.Time) string { return url.QueryEscape(t.UTC().Format(time.RFC3339)) }
	for _, tc := range []struct {
		name, query string
		ctr         string // main if empty
		status      int
		want        string // the body, or for an error what it must say
	}{
		{"everything", "", "", 200, "line-1\nline-2\nline-3\n"},
		{"limitBytes cuts a line", "limitBytes=10", "", 200, "line-1\nlin"},
		{"limitBytes at a line's end", "limitBytes=7", "", 200, "line-1\n"},
		{"limitBytes over the size", "limitBytes=1000", "", 200, "line-1\nline-2\nline-3\n"},
		{"limitBytes after tailLines", "tailLines=2&limitBytes=9", "", 200, "line-2\nli"},
		{"limitBytes of the previous run", "previous=true&limitBytes=3", "", 200, "old"},
		{"limitBytes not a number", "limitBytes=ten", "", 400, "limitBytes: want a number greater than 0"},
		{"limitBytes zero", "limitBytes=0", "", 400, "limitBytes: want a number greater than 0"},
		{"timestamps", "timestamps=true", "", 400, "timestamps: not supported: Portal writes container output straight to log files, without per-line times"},
		{"timestamps false", "timestamps=false", "", 200, "line-1\nline-2\nline-3\n"},
		{"sinceSeconds before the start", "sinceSeconds=7200", "", 200, "line-1\nline-2\nline-3\n"},
		{"sinceSeconds after the start", "sinceSeconds=60", "", 400, "sinceSeconds: not supported after the container started (" + b.started.UTC().Format(time.RFC3339) + ")"},
		{"sinceSeconds not a number", "sinceSeconds=x", "", 400, "sinceSeconds: want a number greater than 0"},
		{"sinceTime at the start", "sinceTime=" + rfc(b.started), "", 200, "line-1\nline-2\nline-3\n"},
		{"sinceTime a second after the start", "sinceTime=" + rfc(b.started.Add(time.Second)), "", 400, "sinceTime: not supported after the container started"},
		{"sinceTime of the previous run", "previous=true&sinceTime=" + rfc(b.prior), "", 200, "old-1\nold-2\n"},
		{"sinceTime within the previous run", "previous=true&sinceTime=" + rfc(b.prior.Add(time.Minute)), "", 400, "sinceTime: not supported after the container started"},
		{"sinceSeconds of a run the status does not show", "sinceSeconds=7200", "side", 400, "sinceSeconds: not supported: the container run's start time is not known yet"},
		{"sinceTime of an init container", "sinceTime=" + rfc(b.prior), "setup", 200, "setup-1\n"},
		{"sinceTime not a time", "sinceTime=yesterday", "", 400, "sinceTime: want an RFC 3339 time"},
		{"sinceTime and sinceSeconds", "sinceSeconds=7200&sinceTime=" + rfc(b.prior), "", 400, "sinceTime: at most one of sinceTime or sinceSeconds"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctr := tc.ctr
			if ctr == "" {
				ctr = "main"
			}
			rec := httptest.NewRecorder()
			b.mux.ServeHTTP(rec, httptest.NewRequest("GET", "/containerLogs/default/web/"+ctr+"?"+tc.query, nil))
			got := rec.Body.String()
			if rec.Code != tc.status {
				t.Fatalf("got status %d (%q), want %d", rec.Code, got, tc.status)
			}
			if tc.status == 200 && got != tc.want || tc.status != 200 && !strings.Contains(got, tc.want) {
				t.Errorf("got %q, want %q", got, tc.want)
			}
		})
	}
}

// TestContainerLogFollowLimit: a follow with limitBytes ends once that
// many bytes are out, though the container runs on and writes more.
func TestContainerLogFollowLimit(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := newLogBed(t)
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		rec := httptest.NewRecorder()
		done := make(chan struct{})
		go func() {
			defer close(done)
			b.mux.ServeHTTP(rec, httptest.NewRequestWithContext(ctx, "GET", "/containerLogs/default/web/main?follow=true&limitBytes=30", nil))
		}()
		synctest.Wait()
		b.write(t, "1.log", "line-4\nline-5\n")
		time.Sleep(time.Second)
		synctest.Wait()
		select {
		case <-done:
		default:
			t.Fatal("still following after limitBytes")
		}
		if got, want := rec.Body.String(), "line-1\nline-2\nline-3\nline-4\nli"; got != want {
			t.Errorf("got %q, want %q", got, want)
		}
	})
}
