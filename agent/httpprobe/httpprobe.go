// Package httpprobe sends one request through the Ingress controller of
// the node it runs on and reports what the controller answered. The node
// agent serves it to the API server (nodes/NAME/proxy/httpprobe), so
// portal explain can see what an Ingress rule answers from where the
// controller listens, without a route from the user's workstation.
//
// It must not turn the agent into an HTTP proxy: the caller chooses only
// the Host header (and TLS server name), the path and the scheme; the
// address dialed is the agent's own configuration, the method is always
// GET with no body and no caller headers, redirects are not followed and
// only the first BodyLimit bytes of the answer are read.
package httpprobe

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// BodyLimit is how much of an answer's body is read and returned.
const BodyLimit = 256

// Limits of what a caller may ask for.
const (
	maxHostLen = 253 // a DNS name's
	maxPathLen = 1024
)

// The schemes a probe may use: the controller's two listeners.
const (
	HTTP  = "http"
	HTTPS = "https"
)

// Request is what the caller chooses about the one request sent.
type Request struct {
	// Scheme picks the listener: HTTP or HTTPS.
	Scheme string
	// Host is the Host header and TLS server name; "" sends the
	// listener's address, as a client that knows no name would.
	Host string
	// Path is the request's path, starting with "/".
	Path string
}

// Result is what the controller answered, the JSON the agent serves.
// Status is 0 when there was no answer; Error then says why.
type Result struct {
	Scheme  string `json:"scheme"`
	Host    string `json:"host,omitempty"`
	Path    string `json:"path"`
	Address string `json:"address"`
	Status  int    `json:"status,omitempty"`
	// Location is the answer's Location header, for redirects.
	Location string `json:"location,omitempty"`
	// Body is the answer's first BodyLimit bytes, control characters
	// and invalid UTF-8 escaped (\x1b), so a backend's output cannot
	// reach a terminal raw.
	Body   string `json:"body,omitempty"`
	Error  string `json:"error,omitempty"`
	Millis int64  `json:"millis"`
}

// Validate reports a request that cannot be sent as asked: an unknown
// scheme, a host that is no DNS name or IP address, a path that does not
// start with "/" or holds a query, fragment, space or control character.
func (r Request) Validate() error {
	if r.Scheme != HTTP && r.Scheme != HTTPS {
		return fmt.Errorf("scheme %q: want http or https", r.Scheme)
	}
	if r.Host != "" && !validHost(r.Host) {
		return fmt.Errorf("host %q: want a DNS name or an IP address", r.Host)
	}
	if !strings.HasPrefix(r.Path, "/") || len(r.Path) > maxPathLen {
		return fmt.Errorf("path %q: want an absolute path of at most %d bytes", r.Path, maxPathLen)
	}
	for _, c := range []byte(r.Path) {
		if c <= ' ' || c == 0x7f || c == '?' || c == '#' {
			return fmt.Errorf("path %q: no query, fragment, space or control character", r.Path)
		}
	}
	return nil
}

func validHost(h string) bool {
	if _, err := netip.ParseAddr(h); err == nil {
		return true
	}
	if len(h) > maxHostLen {
		return false
	}
	for _, label := range strings.Split(h, ".") {
		if label == "" || len(label) > 63 {
			return false
		}
		for _, c := range []byte(label) {
			ok := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_'
			if !ok {
				return false
			}
		}
	}
	return true
}

// Dialer opens connections; net.Dialer is one.
type Dialer interface {
	DialContext(ctx context.Context, network, address string) (net.Conn, error)
}

// Probe sends req, which must be valid, to the listener at address
// (HOST:PORT) through d, waiting at most timeout for the answer's
// headers and first bytes, and says what came back. TLS certificates are
// not verified: the question is what the controller answers, not whether
// the caller would trust it.
func Probe(ctx context.Context, d Dialer, address string, req Request, timeout time.Duration) Result {
	res := Result{Scheme: req.Scheme, Host: req.Host, Path: req.Path, Address: address}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	host := req.Host
	if host == "" {
		host = address
	} else if strings.Contains(host, ":") {
		host = "[" + host + "]"
	}
	u := &url.URL{Scheme: req.Scheme, Host: host, Path: req.Path}
	hr, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		res.Error = err.Error()
		return res
	}
	hr.Header.Set("User-Agent", "portal-explain")
	client := &http.Client{
		Transport: &http.Transport{
			// Never a proxy from the environment, always this listener.
			Proxy: nil,
			DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
				return d.DialContext(ctx, "tcp", address)
			},
			TLSClientConfig:        &tls.Config{ServerName: req.Host, InsecureSkipVerify: true},
			DisableKeepAlives:      true,
			DisableCompression:     true,
			MaxResponseHeaderBytes: 16 << 10,
		},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
	start := time.Now()
	resp, err := client.Do(hr)
	if err != nil {
		res.Millis = time.Since(start).Milliseconds()
		res.Error = describe(err, timeout)
		return res
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, BodyLimit))
	res.Millis = time.Since(start).Milliseconds()
	res.Status = resp.StatusCode
	res.Location = Escape(resp.Header.Get("Location"))
	res.Body = Escape(string(body))
	return res
}

// describe says in a few words why a request got no answer.
func describe(err error, timeout time.Duration) string {
	var ne net.Error
	switch {
	case errors.Is(err, context.DeadlineExceeded) || errors.As(err, &ne) && ne.Timeout():
		return "no answer within " + timeout.String()
	case errors.Is(err, syscall.ECONNREFUSED):
		return "connection refused: nothing listens there"
	}
	var ue *url.Error
	if errors.As(err, &ue) {
		err = ue.Err
	}
	return Escape(err.Error())
}

// Escape writes control characters, escape sequences and invalid UTF-8
// in s as Go escapes (\x1b, \n), leaving printable text as it is.
func Escape(s string) string {
	q := strconv.QuoteToGraphic(s)
	q = q[1 : len(q)-1]
	return strings.ReplaceAll(q, `\"`, `"`)
}
