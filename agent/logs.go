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
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
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
	q := r.URL.Query()
	previous, follow := q.Get("previous") == "true", q.Get("follow") == "true"
	tail := -1
	if s := q.Get("tailLines"); s != "" {
		if tail, err = strconv.Atoi(s); err != nil || tail < 0 {
			http.Error(w, "tailLines: want a non-negative number", http.StatusBadRequest)
			return
		}
	}
	files := logFiles(filepath.Join(a.podDir(pod.UID), "logs", ctr))
	var path string
	switch {
	case previous && len(files) >= 2:
		path = files[len(files)-2]
	case previous:
		http.Error(w, fmt.Sprintf("previous terminated container %q in pod %q not found", ctr, name), http.StatusBadRequest)
		return
	case len(files) > 0:
		path = files[len(files)-1]
	default:
		http.Error(w, fmt.Sprintf("container %q in pod %q is waiting to start", ctr, name), http.StatusBadRequest)
		return
	}
	f, err := os.Open(path)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	defer f.Close()
	w.Header().Set("Content-Type", "text/plain")
	if tail >= 0 {
		if err := seekTail(f, tail); err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
	}
	if _, err := io.Copy(w, f); err != nil || !follow || previous {
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
		n, _ := io.Copy(w, f)
		if n > 0 {
			continue
		}
		if files := logFiles(filepath.Dir(path)); len(files) == 0 || files[len(files)-1] != path || !a.running(ns, name, ctr, pod.UID) {
			io.Copy(w, f)
			return
		}
	}
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
