package ingress

import (
	"io"
	"net"
	"net/http"
	"strconv"
	"sync"
	"time"

	"portal.dev/portal/ingress/route"
)

// accessLog writes one line per request, in a fixed format close to
// nginx's combined log with the proxy's own fields after it:
//
//	REMOTE - [TIME] "METHOD URI PROTO" STATUS BYTES "REFERER" "USER-AGENT" SECONDS "HOST" INGRESS UPSTREAM REQUEST-ID
//
// REMOTE is the client's address, TIME its arrival in UTC as
// 27/Nov/2026:05:20:00 +0000, STATUS the answer's (499: the client went
// away first), BYTES the response body's size, SECONDS the time to the
// end of the response (milliseconds resolution), INGRESS the
// namespace/name of the matched Ingress, UPSTREAM the endpoint that
// answered and REQUEST-ID the X-Request-ID sent to it. A field with no
// value is "-". Quoted fields are escaped as Go strings are, so no
// client can forge a line.
type accessLog struct {
	mu sync.Mutex
	w  io.Writer
}

// logLine is what the access log records of one request.
type logLine struct {
	r      *http.Request
	start  time.Time
	took   time.Duration
	status int
	bytes  int64
	match  route.Match
	req    *request
}

var lineBuffers = sync.Pool{New: func() any { b := make([]byte, 0, 512); return &b }}

func (l *accessLog) write(e logLine) {
	bp := lineBuffers.Get().(*[]byte)
	b := e.append((*bp)[:0])
	l.mu.Lock()
	l.w.Write(b)
	l.mu.Unlock()
	*bp = b
	lineBuffers.Put(bp)
}

// append appends the line of e, newline included, to b.
func (e logLine) append(b []byte) []byte {
	remote := e.r.RemoteAddr
	if host, _, err := net.SplitHostPort(remote); err == nil {
		remote = host
	}
	b = append(field(b, remote), " - ["...)
	b = e.start.UTC().AppendFormat(b, "02/Jan/2006:15:04:05 -0700")
	b = append(b, "] "...)
	b = strconv.AppendQuote(b, e.r.Method+" "+e.r.RequestURI+" "+e.r.Proto)
	b = append(b, ' ')
	b = strconv.AppendInt(b, int64(e.status), 10)
	b = append(b, ' ')
	b = strconv.AppendInt(b, e.bytes, 10)
	b = append(b, ' ')
	b = quoted(b, e.r.Referer())
	b = append(b, ' ')
	b = quoted(b, e.r.UserAgent())
	b = append(b, ' ')
	b = strconv.AppendFloat(b, e.took.Seconds(), 'f', 3, 64)
	b = append(b, ' ')
	b = quoted(b, e.r.Host)
	b = append(b, ' ')
	ingress := ""
	if e.match.Backend != nil {
		ingress = e.match.Ingress.String()
	}
	b = append(field(b, ingress), ' ')
	b = append(field(b, e.req.upstream), ' ')
	if e.req.id == "" && e.req.made {
		// A made ID is hex digits: no need to quote it, nor to make it
		// a string.
		b = e.req.appendID(b)
	} else {
		b = field(b, safeID(e.req.id))
	}
	return append(b, '\n')
}

// field appends v, or "-" when empty.
func field(b []byte, v string) []byte {
	if v == "" {
		return append(b, '-')
	}
	return append(b, v...)
}

// quoted appends v quoted, or "-" when empty.
func quoted(b []byte, v string) []byte {
	if v == "" {
		return append(b, `"-"`...)
	}
	return strconv.AppendQuote(b, v)
}

// safeID is a request ID fit for an unquoted field: the client's own,
// when it has no space or control character, else quoted.
func safeID(id string) string {
	for i := 0; i < len(id); i++ {
		if id[i] <= ' ' || id[i] >= 0x7f || id[i] == '"' {
			return strconv.Quote(id)
		}
	}
	return id
}
