//go:build linux

package agent

import (
	"bufio"
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"

	"portal.dev/portal/pki"
)

// serveLogs serves /containerLogs over HTTPS on Options.Port with a
// self-signed serving certificate, to the API server: a client whose
// certificate the cluster CA signed for pki.APIServerAgentClientUser.
func (a *Agent) serveLogs(ctx context.Context) error {
	if len(a.opts.ClientCAData) == 0 {
		return fmt.Errorf("no client CA (the kubeconfig has no certificate-authority data): the log endpoint would accept anyone")
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(a.opts.ClientCAData) {
		return fmt.Errorf("client CA: no PEM certificate")
	}
	cert, err := a.selfSigned()
	if err != nil {
		return err
	}
	l, err := net.Listen("tcp", net.JoinHostPort("", strconv.Itoa(a.opts.Port)))
	if err != nil {
		return fmt.Errorf("log endpoint port %d: %w", a.opts.Port, err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /containerLogs/{namespace}/{pod}/{container}", a.containerLogs)
	a.addStreamRoutes(mux)
	a.addDiagRoutes(mux)
	srv := &http.Server{Handler: onlyUser(pki.APIServerAgentClientUser, mux), ReadHeaderTimeout: 10 * time.Second,
		TLSConfig: &tls.Config{Certificates: []tls.Certificate{cert}, ClientCAs: pool,
			ClientAuth: tls.RequireAndVerifyClientCert, MinVersion: tls.VersionTLS12}}
	go srv.ServeTLS(l, "", "")
	go func() { <-ctx.Done(); srv.Close() }()
	klog.FromContext(ctx).Info("Serving container logs", "port", a.opts.Port)
	return nil
}

// onlyUser lets through requests whose verified client certificate is
// user's (its CN) and refuses others with 403, as kubelet authorizes an
// authenticated client: every user of the cluster holds a certificate of
// the same CA (admin, nodes, controllers), and none but the API server may
// read a node's logs directly, around pods/log's authorization.
func onlyUser(user string, h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.TLS == nil || len(r.TLS.VerifiedChains) == 0 || r.TLS.VerifiedChains[0][0].Subject.CommonName != user {
			name := "anonymous"
			if r.TLS != nil && len(r.TLS.PeerCertificates) > 0 {
				name = r.TLS.PeerCertificates[0].Subject.CommonName
			}
			http.Error(w, fmt.Sprintf("Forbidden (user=%s, verb=get, resource=nodes, subresource=log)", name), http.StatusForbidden)
			return
		}
		h.ServeHTTP(w, r)
	})
}

func (a *Agent) selfSigned() (tls.Certificate, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return tls.Certificate{}, err
	}
	serial, _ := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: a.opts.NodeName + "@portal-agent"},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().AddDate(1, 0, 0),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		DNSNames:     []string{a.opts.NodeName},
	}
	for _, ip := range a.nodeIPs {
		tmpl.IPAddresses = append(tmpl.IPAddresses, net.IP(ip.AsSlice()))
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return tls.Certificate{}, err
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}, nil
}

// logFiles returns the log files of a container's runs, oldest first.
func logFiles(dir string) []string {
	entries, _ := os.ReadDir(dir)
	type run struct {
		n    int
		path string
	}
	var runs []run
	for _, e := range entries {
		n, err := strconv.Atoi(strings.TrimSuffix(e.Name(), ".log"))
		if err == nil && strings.HasSuffix(e.Name(), ".log") {
			runs = append(runs, run{n, filepath.Join(dir, e.Name())})
		}
	}
	sort.Slice(runs, func(i, j int) bool { return runs[i].n < runs[j].n })
	out := make([]string, len(runs))
	for i, r := range runs {
		out[i] = r.path
	}
	return out
}

func (a *Agent) containerLogs(w http.ResponseWriter, r *http.Request) {
	ns, name, ctr := r.PathValue("namespace"), r.PathValue("pod"), r.PathValue("container")
	pod, err := a.pods.Pods(ns).Get(name)
	if err != nil {
		http.Error(w, fmt.Sprintf("pod %s/%s not found on node %s", ns, name, a.opts.NodeName), http.StatusNotFound)
		return
	}
	opts, err := parseLogOptions(r.URL.Query(), time.Now())
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	files := logFiles(filepath.Join(a.podDir(pod.UID), "logs", ctr))
	var path string
	switch {
	case opts.previous && len(files) >= 2:
		path = files[len(files)-2]
	case opts.previous:
		http.Error(w, fmt.Sprintf("previous terminated container %q in pod %q not found", ctr, name), http.StatusBadRequest)
		return
	case len(files) > 0:
		path = files[len(files)-1]
	default:
		http.Error(w, fmt.Sprintf("container %q in pod %q is waiting to start", ctr, name), http.StatusBadRequest)
		return
	}
	if err := checkSince(opts, runStart(pod, ctr, path)); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	f, err := os.Open(path)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	defer f.Close()
	w.Header().Set("Content-Type", "text/plain")
	if opts.tail >= 0 {
		if err := seekTail(f, opts.tail); err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
	}
	var out io.Writer = w
	if opts.limit >= 0 {
		out = &limitWriter{w: w, remain: opts.limit}
	}
	if _, err := io.Copy(out, f); err != nil || !opts.follow || opts.previous {
		return
	}
	flusher, _ := w.(http.Flusher)
	for {
		if flusher != nil {
			flusher.Flush()
		}
		select {
		case <-r.Context().Done():
			return
		case <-time.After(200 * time.Millisecond):
		}
		n, err := io.Copy(out, f)
		if err != nil {
			return // the limit is reached, or the client went away
		}
		if n > 0 {
			continue
		}
		if files := logFiles(filepath.Dir(path)); len(files) == 0 || files[len(files)-1] != path || !a.running(ns, name, ctr, pod.UID) {
			io.Copy(out, f)
			return
		}
	}
}

// logOptions is a /containerLogs query: kubelet's names and meanings.
type logOptions struct {
	follow, previous bool
	tail             int   // the last tail lines; -1: all
	limit            int64 // at most limit bytes; -1: no limit
	// since selects the lines written at or after it, when not zero;
	// sinceField is the query field that set it, for errors.
	since      time.Time
	sinceField string
}

// parseLogOptions reads the query the API server forwards from
// PodLogOptions. Options Portal cannot honour are refused by name rather
// than ignored: the client would otherwise get other output than it asked
// for without knowing.
func parseLogOptions(q url.Values, now time.Time) (logOptions, error) {
	o := logOptions{follow: q.Get("follow") == "true", previous: q.Get("previous") == "true", tail: -1, limit: -1}
	if q.Get("timestamps") == "true" {
		// Containers write straight into their log files (so they outlive
		// the agent), and a file records no time per line: any timestamp
		// put on a line here would be a guess.
		return o, fmt.Errorf("timestamps: not supported: Portal writes container output straight to log files, without per-line times")
	}
	if s := q.Get("tailLines"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 0 {
			return o, fmt.Errorf("tailLines: want a non-negative number, got %q", s)
		}
		o.tail = n
	}
	if s := q.Get("limitBytes"); s != "" {
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil || n < 1 {
			return o, fmt.Errorf("limitBytes: want a number greater than 0, got %q", s)
		}
		o.limit = n
	}
	if s := q.Get("sinceSeconds"); s != "" {
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil || n < 1 {
			return o, fmt.Errorf("sinceSeconds: want a number greater than 0, got %q", s)
		}
		o.since, o.sinceField = now.Add(-time.Duration(n)*time.Second), "sinceSeconds"
	}
	if s := q.Get("sinceTime"); s != "" {
		if o.sinceField != "" {
			return o, fmt.Errorf("sinceTime: at most one of sinceTime or sinceSeconds may be specified")
		}
		t, err := time.Parse(time.RFC3339, s)
		if err != nil {
			return o, fmt.Errorf("sinceTime: want an RFC 3339 time, got %q", s)
		}
		o.since, o.sinceField = t, "sinceTime"
	}
	return o, nil
}

// checkSince refuses a since-time Portal cannot honour exactly. Without
// per-line times, the only since-times whose selection is known are those
// at or before the run's start (started, zero when unknown): they select
// the whole run. A later one would need to know when each line was
// written, so it is refused rather than answered with the whole run.
func checkSince(o logOptions, started time.Time) error {
	switch {
	case o.since.IsZero() || !started.IsZero() && !o.since.After(started):
		return nil
	case started.IsZero():
		return fmt.Errorf("%s: not supported: the container run's start time is not known yet, and Portal writes container output straight to log files, without per-line times", o.sinceField)
	default:
		return fmt.Errorf("%s: not supported after the container started (%s): Portal writes container output straight to log files, without per-line times; a time at or before the start selects the whole run",
			o.sinceField, started.UTC().Format(time.RFC3339))
	}
}

// runStart is when the container run whose log is path started, as the
// pod's status reports it; zero when the status no longer (or not yet)
// says. The agent takes a run's start time, truncated to the second,
// before it opens the run's log file, so no line of the file is older.
func runStart(pod *corev1.Pod, ctr, path string) time.Time {
	n, err := strconv.Atoi(strings.TrimSuffix(filepath.Base(path), ".log"))
	if err != nil {
		return time.Time{}
	}
	id := ctrID(pod.UID, ctr, int32(n))
	for _, s := range slices.Concat(pod.Status.InitContainerStatuses, pod.Status.ContainerStatuses) {
		if s.Name != ctr {
			continue
		}
		if s.ContainerID == id && s.State.Running != nil {
			return s.State.Running.StartedAt.Time
		}
		for _, t := range []*corev1.ContainerStateTerminated{s.State.Terminated, s.LastTerminationState.Terminated} {
			if t != nil && t.ContainerID == id {
				return t.StartedAt.Time
			}
		}
	}
	return time.Time{}
}

// errLimit ends a copy at limitBytes. It is no failure: the client asked
// for that many bytes and has them.
var errLimit = errors.New("limitBytes reached")

// limitWriter passes on the first remain bytes written to it, cutting a
// line if need be as kubelet does, and fails with errLimit once they are
// written, so a follow stops there.
type limitWriter struct {
	w      io.Writer
	remain int64
}

func (l *limitWriter) Write(p []byte) (int, error) {
	if l.remain <= 0 {
		return 0, errLimit
	}
	if int64(len(p)) > l.remain {
		p = p[:l.remain]
	}
	n, err := l.w.Write(p)
	l.remain -= int64(n)
	if err == nil && l.remain <= 0 {
		err = errLimit
	}
	return n, err
}

// running says whether the container's current run is still running, as
// the pod's status reports it.
func (a *Agent) running(ns, name, ctr string, uid types.UID) bool {
	pod, err := a.pods.Pods(ns).Get(name)
	if err != nil || pod.UID != uid {
		return false
	}
	for _, statuses := range [][]corev1.ContainerStatus{pod.Status.InitContainerStatuses, pod.Status.ContainerStatuses} {
		for _, s := range statuses {
			if s.Name == ctr {
				return s.State.Running != nil
			}
		}
	}
	return false
}

// seekTail positions f at the start of its last n lines.
func seekTail(f *os.File, n int) error {
	st, err := f.Stat()
	if err != nil {
		return err
	}
	size := st.Size()
	if n == 0 {
		_, err := f.Seek(size, io.SeekStart)
		return err
	}
	const chunk = 8192
	var buf []byte
	pos := size
	for pos > 0 {
		step := int64(chunk)
		if pos < step {
			step = pos
		}
		pos -= step
		b := make([]byte, step)
		if _, err := f.ReadAt(b, pos); err != nil && err != io.EOF {
			return err
		}
		buf = append(b, buf...)
		trimmed := bytes.TrimSuffix(buf, []byte("\n"))
		if bytes.Count(trimmed, []byte("\n")) >= n {
			break
		}
	}
	trimmed := bytes.TrimSuffix(buf, []byte("\n"))
	lines := bytes.Count(trimmed, []byte("\n")) + 1
	skip := max(lines-n, 0)
	off := pos
	sc := bufio.NewReader(bytes.NewReader(buf))
	for i := 0; i < skip; i++ {
		line, err := sc.ReadBytes('\n')
		off += int64(len(line))
		if err != nil {
			break
		}
	}
	_, err = f.Seek(off, io.SeekStart)
	return err
}
