package e2e

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"portal.dev/portal/e2e/framework"
)

// The second controller's ports in the node: plain HTTP, TLS and its
// --metrics-bind-address.
const (
	otherHTTPPort   = "8081"
	otherHTTPSPort  = "8444"
	otherMetrics    = "127.0.0.1:10299"
	otherBodyPeriod = 3 * time.Second // its --client-body-timeout
)

// startOtherController runs `portal ingress` in the node beside the
// server's own controller, with flags a test cannot give the server's:
// its metrics on otherMetrics, no access log, a client body timeout of
// otherBodyPeriod. It serves the same Ingresses on otherHTTPPort and
// otherHTTPSPort and publishes the same status (node1's address). It
// returns the path of its output, and is killed when TestIngress ends.
func (ib *ingressBed) startOtherController(t *testing.T) string {
	t.Helper()
	if ib.otherLog != "" {
		return ib.otherLog
	}
	kc := ib.server.UserKubeconfig(ib.t, "system:portal-ingress", "https://127.0.0.1:6443")
	ib.otherLog = filepath.Join(ib.logs, "other-ingress.log")
	log, err := os.Create(ib.otherLog)
	if err != nil {
		t.Fatal(err)
	}
	ib.node.Start(log, framework.Binary(t), "ingress", "--kubeconfig", kc, "--hostname-override", "node1",
		"--http-port", otherHTTPPort, "--https-port", otherHTTPSPort, "--metrics-bind-address", otherMetrics,
		"--access-log=false", "--client-body-timeout", otherBodyPeriod.String())
	ib.t.Cleanup(func() {
		if ib.t.Failed() {
			data, _ := os.ReadFile(ib.otherLog)
			lines := strings.Split(string(data), "\n")
			ib.t.Logf("last lines of the second controller's log:\n%s", strings.Join(lines[max(0, len(lines)-30):], "\n"))
		}
	})
	return ib.otherLog
}

// applySettingsIngress applies the Ingress settings, whose host
// settings.test routes / to alpha and /empty to the Service empty (no
// endpoint), and waits until the server's controller and, when other is
// set, the second controller serve it.
func (ib *ingressBed) applySettingsIngress(t *testing.T, other bool) {
	t.Helper()
	apply(t, ib.server, ingress("settings", rule("settings.test", path{"/", prefix, "alpha"}, path{"/empty", prefix, "empty"})))
	urls := []string{"http://settings.test/"}
	if other {
		urls = append(urls, "http://settings.test:"+otherHTTPPort+"/")
	}
	for _, url := range urls {
		eventuallyWithin(t, 60*time.Second, url+" served", func() (bool, string) {
			a := ib.curl(url)
			return a.code == 200 && serviceOf(a.backend) == "alpha", fmt.Sprintf("GET %s: got %v, want 200 from alpha", url, a)
		})
	}
}

// testMetrics: the second controller's --metrics-bind-address serves
// Prometheus text, and the request counter's series of the matched
// Ingress, host and path grow by status class as requests are answered;
// requests no rule matches count with an empty ingress label.
func (ib *ingressBed) testMetrics(t *testing.T) {
	ib.startOtherController(t)
	ib.applySettingsIngress(t, true)
	const requests = "portal_ingress_requests_total"
	ok := map[string]string{"ingress": "default/settings", "host": "settings.test", "path": "/", "method": "GET", "status": "2xx"}
	unavailable := map[string]string{"ingress": "default/settings", "host": "settings.test", "path": "/empty", "method": "GET", "status": "5xx"}
	unmatched := map[string]string{"ingress": "", "method": "GET", "status": "4xx"}
	latency := map[string]string{"ingress": "default/settings"}
	before := ib.scrape(t)
	for range 3 {
		if a := ib.curl("http://settings.test:" + otherHTTPPort + "/metered"); a.code != 200 {
			t.Fatalf("GET http://settings.test:%s/metered: got %v, want 200", otherHTTPPort, a)
		}
	}
	for range 2 {
		if a := ib.curl("http://settings.test:" + otherHTTPPort + "/empty"); a.code != 503 {
			t.Fatalf("GET http://settings.test:%s/empty: got %v, want 503", otherHTTPPort, a)
		}
	}
	if a := ib.curl("http://nowhere.test:" + otherHTTPPort + "/"); a.code != 404 {
		t.Fatalf("GET http://nowhere.test:%s/: got %v, want 404", otherHTTPPort, a)
	}
	// A request is counted as its handler ends, which may be just after
	// the client has its answer.
	eventuallyWithin(t, 10*time.Second, "the requests counted", func() (bool, string) {
		after := ib.scrape(t)
		var diffs []string
		for _, c := range []struct {
			name   string
			labels map[string]string
			want   float64
		}{
			{requests, ok, 3},
			{requests, unavailable, 2},
			{requests, unmatched, 1},
			{"portal_ingress_request_duration_seconds", latency, 5},
		} {
			if got := sample(after, c.name, c.labels) - sample(before, c.name, c.labels); got != c.want {
				diffs = append(diffs, fmt.Sprintf("%s%v grew by %v, want %v", c.name, c.labels, got, c.want))
			}
		}
		return len(diffs) == 0, strings.Join(diffs, "; ")
	})
	after := ib.scrape(t)
	if ts := sample(after, "portal_ingress_config_last_applied_timestamp_seconds", nil); time.Since(time.Unix(int64(ts), 0)) > time.Hour {
		t.Errorf("portal_ingress_config_last_applied_timestamp_seconds: got %v, want a time of this run", ts)
	}
	if n := sample(after, "portal_ingress_configs_applied_total", nil); n < 1 {
		t.Errorf("portal_ingress_configs_applied_total: got %v, want at least 1", n)
	}
}

// scrape gets the second controller's metrics from inside the node.
func (ib *ingressBed) scrape(t *testing.T) map[string]*dto.MetricFamily {
	t.Helper()
	var families map[string]*dto.MetricFamily
	client := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{DialContext: ib.node.DialContext}}
	eventuallyWithin(t, 30*time.Second, "the metrics served on "+otherMetrics, func() (bool, string) {
		resp, err := client.Get("http://" + otherMetrics + "/metrics")
		if err != nil {
			return false, err.Error()
		}
		defer resp.Body.Close()
		if ct := resp.Header.Get("Content-Type"); resp.StatusCode != 200 || !strings.HasPrefix(ct, "text/plain") {
			return false, fmt.Sprintf("GET /metrics: got %d %s, want 200 text/plain", resp.StatusCode, ct)
		}
		parser := expfmt.NewTextParser(model.LegacyValidation)
		families, err = parser.TextToMetricFamilies(resp.Body)
		if err != nil {
			return false, "Prometheus text: " + err.Error()
		}
		return true, ""
	})
	return families
}

// sample sums the series of the metric name whose labels include labels
// (a label absent counts as empty): a counter's or gauge's value, a
// histogram's count. A metric or series not there yet is 0.
func sample(families map[string]*dto.MetricFamily, name string, labels map[string]string) float64 {
	f := families[name]
	if f == nil {
		return 0
	}
	var sum float64
	for _, m := range f.Metric {
		have := map[string]string{}
		for _, l := range m.Label {
			have[l.GetName()] = l.GetValue()
		}
		match := true
		for k, v := range labels {
			match = match && have[k] == v
		}
		if !match {
			continue
		}
		switch {
		case m.Counter != nil:
			sum += m.Counter.GetValue()
		case m.Gauge != nil:
			sum += m.Gauge.GetValue()
		case m.Histogram != nil:
			sum += float64(m.Histogram.GetSampleCount())
		}
	}
	return sum
}

// testAccessLog: the server's controller (--access-log on by default)
// writes a line for each request, with its method, path, status, host,
// Ingress, the endpoint that answered and the request's ID; the second
// controller, with --access-log=false, writes none.
func (ib *ingressBed) testAccessLog(t *testing.T) {
	otherLog := ib.startOtherController(t)
	ib.applySettingsIngress(t, true)
	stamp := time.Now().UnixNano()
	quiet, logged, lost := fmt.Sprintf("quiet-%d", stamp), fmt.Sprintf("logged-%d", stamp), fmt.Sprintf("lost-%d", stamp)
	if a := ib.curl("http://settings.test:"+otherHTTPPort+"/quiet", "-H", "X-Request-ID: "+quiet); a.code != 200 {
		t.Fatalf("GET http://settings.test:%s/quiet: got %v, want 200", otherHTTPPort, a)
	}
	if a := ib.curl("http://settings.test/logged?x=1", "-H", "X-Request-ID: "+logged, "-A", "e2e-agent"); a.code != 200 {
		t.Fatalf("GET http://settings.test/logged?x=1: got %v, want 200", a)
	}
	if a := ib.curl("http://nowhere.test/lost", "-H", "X-Request-ID: "+lost); a.code != 404 {
		t.Fatalf("GET http://nowhere.test/lost: got %v, want 404", a)
	}
	eps, _ := endpointsOf(t, ib.c, "default", "alpha")
	var upstreams []string
	for ip := range eps {
		upstreams = append(upstreams, regexp.QuoteMeta(net.JoinHostPort(ip, "8080")))
	}
	at := `\[\d\d/[A-Z][a-z]{2}/\d{4}:\d\d:\d\d:\d\d \+0000\]`
	want := map[string]*regexp.Regexp{
		logged: regexp.MustCompile(`^10\.100\.1\.2 - ` + at + ` "GET /logged\?x=1 HTTP/1\.1" 200 \d+ "-" "e2e-agent" \d+\.\d{3} "settings\.test" default/settings (` +
			strings.Join(upstreams, "|") + `) ` + logged + `$`),
		lost: regexp.MustCompile(`^10\.100\.1\.2 - ` + at + ` "GET /lost HTTP/1\.1" 404 \d+ "-" "curl/[^"]+" \d+\.\d{3} "nowhere\.test" - - ` + lost + `$`),
	}
	serverLog := filepath.Join(ib.server.DataDir, "portal.log")
	for id, re := range want {
		eventuallyWithin(t, 10*time.Second, "the access log line of "+id, func() (bool, string) {
			line := lineWith(t, serverLog, id)
			return re.MatchString(line), fmt.Sprintf("got %q, want it to match %s", line, re)
		})
	}
	// The second controller answered first: had it logged, its line would
	// be there by now.
	if line := lineWith(t, otherLog, quiet); line != "" {
		t.Errorf("--access-log=false: got the line %q, want none", line)
	}
}

// lineWith is the last line of the file that holds s, or "".
func lineWith(t *testing.T, file, s string) string {
	t.Helper()
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var found string
	for _, l := range strings.Split(string(data), "\n") {
		if strings.Contains(l, s) {
			found = l
		}
	}
	return found
}

// testStalledBody: a client that sends its request head and part of the
// body, then nothing, is cut off once the second controller's
// --client-body-timeout passes: the connection is closed with no answer
// and the request counted as 408, as nginx's client_body_timeout does
// (nginx 1.22 answers nothing and logs 408). A client that uploads slowly,
// each pause shorter than the timeout, is served.
func (ib *ingressBed) testStalledBody(t *testing.T) {
	ib.startOtherController(t)
	ib.applySettingsIngress(t, true)
	timedOut := map[string]string{"ingress": "default/settings", "path": "/", "method": "POST", "status": "4xx"}
	before := sample(ib.scrape(t), "portal_ingress_requests_total", timedOut)

	t.Run("stalled", func(t *testing.T) {
		conn := ib.dialOther(t)
		io.WriteString(conn, "POST /upload HTTP/1.1\r\nHost: settings.test\r\nContent-Length: 100\r\n\r\nabc")
		conn.SetReadDeadline(time.Now().Add(otherBodyPeriod + 15*time.Second))
		got, err := io.ReadAll(conn)
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() {
			t.Fatalf("a body stalled for %v past --client-body-timeout %v: the connection is still open (got %q)", 15*time.Second, otherBodyPeriod, got)
		}
		if len(got) != 0 {
			t.Errorf("a stalled body: got the answer %q, want the connection closed with none, as nginx does", got)
		}
		eventuallyWithin(t, 10*time.Second, "the request counted as 4xx", func() (bool, string) {
			n := sample(ib.scrape(t), "portal_ingress_requests_total", timedOut) - before
			return n == 1, fmt.Sprintf("portal_ingress_requests_total%v grew by %v, want 1", timedOut, n)
		})
	})

	t.Run("slow but steady", func(t *testing.T) {
		conn := ib.dialOther(t)
		io.WriteString(conn, "POST /upload HTTP/1.1\r\nHost: settings.test\r\nContent-Length: 4\r\nConnection: close\r\n\r\n")
		// Each part comes a second after the last: the whole body takes
		// longer than the timeout, each read of it does not.
		for _, part := range []string{"a", "b", "c", "d"} {
			time.Sleep(time.Second)
			io.WriteString(conn, part)
		}
		conn.SetReadDeadline(time.Now().Add(10 * time.Second))
		got, err := io.ReadAll(conn)
		if err != nil || !strings.HasPrefix(string(got), "HTTP/1.1 200 ") {
			t.Errorf("a body sent a byte a second: got %q (%v), want 200", got, err)
		}
	})
}

// dialOther connects from the client namespace to the second
// controller's HTTP port, closed when the test ends.
func (ib *ingressBed) dialOther(t *testing.T) net.Conn {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	conn, err := ib.dialNode(ctx, "tcp", ":"+otherHTTPPort)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}
