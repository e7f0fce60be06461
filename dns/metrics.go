package dns

import (
	"strconv"
	"sync/atomic"
	"time"

	"github.com/miekg/dns"
	"github.com/prometheus/client_golang/prometheus"

	"portal.dev/portal/dns/forward"
)

// The metrics carry CoreDNS's names and labels where they mean the same,
// so that dashboards built for CoreDNS work. Counting is a few atomic adds
// into fixed arrays on the hot path; a custom Collector turns them into
// Prometheus samples only when scraped.

const (
	protoUDP = iota
	protoTCP
	nProtos
)

const (
	famIPv4 = iota
	famIPv6
	nFamilies
)

const (
	pluginKubernetes = iota // answered from the cluster index
	pluginForward           // answered by an upstream
	pluginCache             // answered from the forwarder's cache
	pluginNone              // answered by the server itself (errors)
	nPlugins
)

var pluginNames = [nPlugins]string{"kubernetes", "forward", "cache", ""}

// typeNames are the query types counted by name; CoreDNS counts these (and
// a few obsolete ones) by name and the rest as "other".
var typeNames = []string{"other", "A", "AAAA", "NS", "CNAME", "SOA", "PTR", "MX", "TXT", "SRV", "NAPTR", "DS", "DNSKEY", "HTTPS", "SVCB", "CAA", "ANY", "IXFR", "AXFR"}

var typeIndex = func() map[uint16]int {
	m := map[uint16]int{}
	for i, n := range typeNames[1:] {
		m[dns.StringToType[n]] = i + 1
	}
	return m
}()

func typeIdx(t uint16) int {
	switch t { // the common ones without a map lookup
	case dns.TypeA:
		return 1
	case dns.TypeAAAA:
		return 2
	}
	return typeIndex[t]
}

const nTypes = 19

const nRcodes = 24

// buckets are CoreDNS's plugin.TimeBuckets: 0.25ms doubling to 8s.
var buckets = prometheus.ExponentialBuckets(0.00025, 2, 16)

var bucketNanos = func() []int64 {
	out := make([]int64, len(buckets))
	for i, b := range buckets {
		out[i] = int64(b * 1e9)
	}
	return out
}()

type metrics struct {
	server    string
	requests  [nProtos][nFamilies][nTypes]atomic.Uint64
	responses [nRcodes][nPlugins]atomic.Uint64
	durCounts [nTypes][16]atomic.Uint64 // non-cumulative, per bucket; the last also holds +Inf
	durInf    [nTypes]atomic.Uint64
	durSum    [nTypes]atomic.Uint64 // nanoseconds
	fwd       *forward.Forwarder
	upstreams []string

	reqDesc, respDesc, durDesc, hitDesc, missDesc, fwdDesc, fwdFailDesc *prometheus.Desc
}

func newMetrics(server string, fwd *forward.Forwarder, upstreams []string) *metrics {
	m := &metrics{server: server, fwd: fwd, upstreams: upstreams}
	m.reqDesc = prometheus.NewDesc("coredns_dns_requests_total", "Counter of DNS requests made per zone, protocol and family.",
		[]string{"server", "zone", "view", "proto", "family", "type"}, nil)
	m.respDesc = prometheus.NewDesc("coredns_dns_responses_total", "Counter of response status codes.",
		[]string{"server", "zone", "view", "rcode", "plugin"}, nil)
	m.durDesc = prometheus.NewDesc("coredns_dns_request_duration_seconds", "Histogram of the time (in seconds) each request took per zone.",
		[]string{"server", "zone", "view", "type"}, nil)
	m.hitDesc = prometheus.NewDesc("coredns_cache_hits_total", "The count of cache hits.",
		[]string{"server", "type", "zones", "view"}, nil)
	m.missDesc = prometheus.NewDesc("coredns_cache_misses_total", "The count of cache misses. Deprecated, derive misses from cache hits/requests counters.",
		[]string{"server", "zones", "view"}, nil)
	m.fwdDesc = prometheus.NewDesc("coredns_forward_requests_total", "Counter of requests made to upstream servers.",
		[]string{"to"}, nil)
	m.fwdFailDesc = prometheus.NewDesc("portal_dns_forward_failures_total", "Counter of failed exchanges with upstream servers.",
		nil, nil)
	return m
}

// observe counts one answered request.
func (m *metrics) observe(proto, fam int, qtype uint16, rcode, plugin int, d time.Duration) {
	t := typeIdx(qtype)
	m.requests[proto][fam][t].Add(1)
	if rcode < 0 || rcode >= nRcodes {
		rcode = dns.RcodeServerFailure
	}
	m.responses[rcode][plugin].Add(1)
	ns := int64(d)
	m.durSum[t].Add(uint64(ns))
	for i, b := range bucketNanos {
		if ns <= b {
			m.durCounts[t][i].Add(1)
			return
		}
	}
	m.durInf[t].Add(1)
}

// Describe sends nothing: the collector is unchecked, its label values
// depend on traffic.
func (m *metrics) Describe(chan<- *prometheus.Desc) {}

// Collect turns the counters into samples.
func (m *metrics) Collect(ch chan<- prometheus.Metric) {
	const zone, view = ".", ""
	for p := range nProtos {
		proto := [...]string{"udp", "tcp"}[p]
		for f := range nFamilies {
			fam := strconv.Itoa(f + 1)
			for t := range nTypes {
				if v := m.requests[p][f][t].Load(); v > 0 {
					ch <- prometheus.MustNewConstMetric(m.reqDesc, prometheus.CounterValue, float64(v), m.server, zone, view, proto, fam, typeNames[t])
				}
			}
		}
	}
	for rc := range nRcodes {
		for p := range nPlugins {
			if v := m.responses[rc][p].Load(); v > 0 {
				name, ok := dns.RcodeToString[rc]
				if !ok {
					name = strconv.Itoa(rc)
				}
				ch <- prometheus.MustNewConstMetric(m.respDesc, prometheus.CounterValue, float64(v), m.server, zone, view, name, pluginNames[p])
			}
		}
	}
	for t := range nTypes {
		var total uint64
		cum := map[float64]uint64{}
		for i, b := range buckets {
			total += m.durCounts[t][i].Load()
			cum[b] = total
		}
		total += m.durInf[t].Load()
		if total == 0 {
			continue
		}
		ch <- prometheus.MustNewConstHistogram(m.durDesc, total, float64(m.durSum[t].Load())/1e9, cum, m.server, zone, view, typeNames[t])
	}
	if m.fwd != nil {
		c := &m.fwd.Counters
		ch <- prometheus.MustNewConstMetric(m.hitDesc, prometheus.CounterValue, float64(c.CacheHitsSuccess.Load()), m.server, "success", ".", view)
		ch <- prometheus.MustNewConstMetric(m.hitDesc, prometheus.CounterValue, float64(c.CacheHitsDenial.Load()), m.server, "denial", ".", view)
		ch <- prometheus.MustNewConstMetric(m.missDesc, prometheus.CounterValue, float64(c.CacheMissesSuccess.Load()+c.CacheMissesDenial.Load()), m.server, ".", view)
		for i, up := range m.upstreams {
			ch <- prometheus.MustNewConstMetric(m.fwdDesc, prometheus.CounterValue, float64(m.fwd.UpstreamRequests(i)), up)
		}
		ch <- prometheus.MustNewConstMetric(m.fwdFailDesc, prometheus.CounterValue, float64(c.Failures.Load()))
	}
}
