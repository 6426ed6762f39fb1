package collector

import (
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/deployment-service/deployment_service_exporter/client"
)

// namespace prefixes every metric of the exporter.
const namespace = "deployment_service"

// RequestMetrics holds the metrics kept across scrapes about every request
// sent to the API of one service, and about its polls. It implements client.Observer, and
// prometheus.Collector: /metrics registers it once, /probe keeps one per
// target and module and serves it on the registry of each scrape.
//
// Up to 1,000 /probe targets each have one, so it is compact: the
// counters are arrays and maps turned into const metrics when gathered,
// the descriptors are shared, and the latency histogram is
// durationHistogram, one per endpoint, made at its first request. The
// vectors of client_golang took 24 KB a target; this takes under 2.
type RequestMetrics struct {
	// errors counts failures by endpoint and reason; every pair is
	// exported, at 0 before its first failure.
	errors [numEndpoints][numReasons]atomic.Uint64
	// polls and pollFailures count polls and those after which
	// deployment_service_up was 0: the availability SLI.
	polls, pollFailures atomic.Uint64
	// created is when the counters began, their created timestamp
	// (OpenMetrics _created), so that a reset shows as one.
	created time.Time

	mu sync.Mutex
	// requests counts requests by endpoint and status (0: no response);
	// an endpoint meets a status or two.
	requests [numEndpoints][]statusCount
	duration [numEndpoints]*durationHistogram
}

type statusCount struct {
	status  int
	n       uint64
	created time.Time
}

var (
	_ client.Observer      = (*RequestMetrics)(nil)
	_ PollObserver         = (*RequestMetrics)(nil)
	_ prometheus.Collector = (*RequestMetrics)(nil)
)

const (
	numEndpoints = 4
	numReasons   = 6
)

// endpointIndex and reasonIndex place a label value in the arrays of
// RequestMetrics, in the order of client.Endpoints and client.Reasons.
var (
	endpointIndex = indexOf(client.Endpoints)
	reasonIndex   = indexOf(client.Reasons)
)

func indexOf[T comparable](values []T) map[T]int {
	m := make(map[T]int, len(values))
	for i, v := range values {
		m[v] = i
	}
	return m
}

var (
	requestDurationDesc = prometheus.NewDesc(prometheus.BuildFQName(namespace, "", "request_duration_seconds"),
		"Latency of each HTTP request to the deployment service API.",
		[]string{"endpoint"}, nil)
	requestsDesc = prometheus.NewDesc(prometheus.BuildFQName(namespace, "", "requests_total"),
		"Requests sent to the deployment service API, by HTTP status code (none when no response came).",
		[]string{"endpoint", "code"}, nil)
	requestErrorsDesc = prometheus.NewDesc(prometheus.BuildFQName(namespace, "", "request_errors_total"),
		"Failed requests to the deployment service API, by reason.",
		[]string{"endpoint", "reason"}, nil)
	pollsDesc = prometheus.NewDesc(prometheus.BuildFQName(namespace, "", "polls_total"),
		"Polls of the deployment service: one per poll, however many scrapes shared it, held-off ones included.",
		nil, nil)
	pollFailuresDesc = prometheus.NewDesc(prometheus.BuildFQName(namespace, "", "poll_failures_total"),
		"Polls after which deployment_service_up was 0, held-off ones included.",
		nil, nil)
)

// NewRequestMetrics creates the request metrics and registers them on reg.
func NewRequestMetrics(reg prometheus.Registerer) *RequestMetrics {
	m := newRequestMetrics()
	reg.MustRegister(m)
	return m
}

func newRequestMetrics() *RequestMetrics { return &RequestMetrics{created: time.Now()} }

// ObserveRequest implements client.Observer.
func (m *RequestMetrics) ObserveRequest(ep client.Endpoint, status int, d time.Duration) {
	i, ok := endpointIndex[ep]
	if !ok {
		return
	}
	m.mu.Lock()
	if m.duration[i] == nil {
		m.duration[i] = newDurationHistogram(requestDurationDesc, string(ep))
	}
	m.count(i, status)
	h := m.duration[i]
	m.mu.Unlock()
	h.Observe(d.Seconds())
}

// count adds a request of endpoint i with status; m.mu is held.
func (m *RequestMetrics) count(i, status int) {
	for k := range m.requests[i] {
		if m.requests[i][k].status == status {
			m.requests[i][k].n++
			return
		}
	}
	m.requests[i] = append(m.requests[i], statusCount{status: status, n: 1, created: time.Now()})
}

// ObserveError implements client.Observer.
func (m *RequestMetrics) ObserveError(ep client.Endpoint, reason client.Reason) {
	i, ok := endpointIndex[ep]
	j, ok2 := reasonIndex[reason]
	if ok && ok2 {
		m.errors[i][j].Add(1)
	}
}

// ObservePoll implements PollObserver.
func (m *RequestMetrics) ObservePoll(up bool) {
	m.polls.Add(1)
	if !up {
		m.pollFailures.Add(1)
	}
}

// Describe implements prometheus.Collector.
func (m *RequestMetrics) Describe(ch chan<- *prometheus.Desc) {
	ch <- requestDurationDesc
	ch <- requestsDesc
	ch <- requestErrorsDesc
	ch <- pollsDesc
	ch <- pollFailuresDesc
}

// Collect implements prometheus.Collector.
func (m *RequestMetrics) Collect(ch chan<- prometheus.Metric) {
	// Failures first: read the other way, a poll ending in between could
	// show more failures than polls.
	failures := m.pollFailures.Load()
	ch <- prometheus.MustNewConstMetricWithCreatedTimestamp(pollsDesc, prometheus.CounterValue, float64(m.polls.Load()), m.created)
	ch <- prometheus.MustNewConstMetricWithCreatedTimestamp(pollFailuresDesc, prometheus.CounterValue, float64(failures), m.created)
	for i, ep := range client.Endpoints {
		for j, r := range client.Reasons {
			ch <- prometheus.MustNewConstMetricWithCreatedTimestamp(requestErrorsDesc, prometheus.CounterValue, float64(m.errors[i][j].Load()), m.created, string(ep), string(r))
		}
	}
	// Taken under the lock, sent without it: the registry reads the
	// channel at its own pace.
	var out []prometheus.Metric
	m.mu.Lock()
	for i, ep := range client.Endpoints {
		for _, c := range m.requests[i] {
			code := "none"
			if c.status != 0 {
				code = strconv.Itoa(c.status)
			}
			out = append(out, prometheus.MustNewConstMetricWithCreatedTimestamp(requestsDesc, prometheus.CounterValue, float64(c.n), c.created, string(ep), code))
		}
		if h := m.duration[i]; h != nil {
			out = append(out, h)
		}
	}
	m.mu.Unlock()
	for _, metric := range out {
		ch <- metric
	}
}

// targetInfoDesc describes deployment_service_target_info; the page label
// is there only when --web.external-url says where people reach the
// exporter.
var (
	targetInfoDesc = prometheus.NewDesc(prometheus.BuildFQName(namespace, "", "target_info"),
		"The deployment service this answer is about, named by its base URL (redacted: no user info, credential-like query values cut out); always 1.",
		[]string{"url"}, nil)
	targetInfoPageDesc = prometheus.NewDesc(prometheus.BuildFQName(namespace, "", "target_info"),
		"The deployment service this answer is about, named by its base URL (redacted: no user info, credential-like query values cut out), with the exporter's page about it; always 1.",
		[]string{"url", "page"}, nil)
)

// TargetInfo is the collector of deployment_service_target_info for one
// service, which names the service in alerts whatever the instance label
// holds, and links to the exporter's page about it.
type TargetInfo struct {
	desc *prometheus.Desc
	m    prometheus.Metric
}

var _ prometheus.Collector = (*TargetInfo)(nil)

// NewTargetInfo returns the collector for the service at the given base
// URL, already redacted (client.RedactURL). page is the exporter's page
// about it, "" when the exporter's own URL is not known.
func NewTargetInfo(redactedURL, page string) *TargetInfo {
	if page == "" {
		return &TargetInfo{desc: targetInfoDesc, m: prometheus.MustNewConstMetric(targetInfoDesc, prometheus.GaugeValue, 1, redactedURL)}
	}
	return &TargetInfo{desc: targetInfoPageDesc, m: prometheus.MustNewConstMetric(targetInfoPageDesc, prometheus.GaugeValue, 1, redactedURL, page)}
}

// Describe implements prometheus.Collector.
func (t *TargetInfo) Describe(ch chan<- *prometheus.Desc) { ch <- t.desc }

// Collect implements prometheus.Collector.
func (t *TargetInfo) Collect(ch chan<- prometheus.Metric) { ch <- t.m }
