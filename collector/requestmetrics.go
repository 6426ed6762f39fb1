package collector

import (
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/deployment-service/deployment_service_exporter/client"
)

const namespace = "deployment_service"

var (
	requestDurationDesc = prometheus.NewDesc(namespace+"_request_duration_seconds",
		"Latency of each HTTP request to the deployment service API.", []string{"endpoint"}, nil)
	requestsDesc = prometheus.NewDesc(namespace+"_requests_total",
		"Requests sent to the deployment service API, by HTTP status code (none when no response came).",
		[]string{"endpoint", "code"}, nil)
	requestErrorsDesc = prometheus.NewDesc(namespace+"_request_errors_total",
		"Failed requests to the deployment service API, by reason.", []string{"endpoint", "reason"}, nil)
	pollsDesc = prometheus.NewDesc(namespace+"_polls_total",
		"Polls of the deployment service: one per poll, however many scrapes shared it, held-off ones included.", nil, nil)
	pollFailuresDesc = prometheus.NewDesc(namespace+"_poll_failures_total",
		"Polls after which deployment_service_up was 0, held-off ones included.", nil, nil)
)

// RequestMetrics counts the requests to one service and its polls across
// scrapes, as plain counts collected as const metrics (BENCHMARKS.md, item 8).
type RequestMetrics struct {
	mu                  sync.Mutex
	created             time.Time // of the counters, and of every error count
	polls, pollFailures uint64
	requests            map[[2]string]counter // by endpoint and code
	errors              map[[2]string]uint64  // by endpoint and reason
	duration            map[client.Endpoint]*durationHistogram
}

type counter struct {
	n       uint64
	created time.Time
}

// NewRequestMetrics creates the request metrics and registers them on reg.
func NewRequestMetrics(reg prometheus.Registerer) *RequestMetrics {
	m := newRequestMetrics()
	reg.MustRegister(m)
	return m
}

func newRequestMetrics() *RequestMetrics {
	return &RequestMetrics{
		created: time.Now(), requests: map[[2]string]counter{}, errors: map[[2]string]uint64{},
		duration: map[client.Endpoint]*durationHistogram{},
	}
}

// ObserveRequest implements client.Observer.
func (m *RequestMetrics) ObserveRequest(ep client.Endpoint, status int, d time.Duration) {
	m.mu.Lock()
	defer m.mu.Unlock()
	k := [2]string{string(ep), "none"} // none: no response came
	if status != 0 {
		k[1] = strconv.Itoa(status)
	}
	c, ok := m.requests[k]
	if !ok {
		c.created = time.Now()
	}
	c.n++
	m.requests[k] = c
	h := m.duration[ep]
	if h == nil {
		h = newDurationHistogram()
		m.duration[ep] = h
	}
	h.observe(d.Seconds())
}

// ObserveError implements client.Observer.
func (m *RequestMetrics) ObserveError(ep client.Endpoint, reason client.Reason) {
	m.mu.Lock()
	m.errors[[2]string{string(ep), string(reason)}]++
	m.mu.Unlock()
}

// ObservePoll counts a poll; up is deployment_service_up after it.
func (m *RequestMetrics) ObservePoll(up bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.polls++
	if !up {
		m.pollFailures++
	}
}

// Describe implements prometheus.Collector.
func (m *RequestMetrics) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{requestDurationDesc, requestsDesc, requestErrorsDesc, pollsDesc, pollFailuresDesc} {
		ch <- d
	}
}

// Collect implements prometheus.Collector; every endpoint and reason of
// request_errors_total is sent, at 0 before its first failure.
func (m *RequestMetrics) Collect(ch chan<- prometheus.Metric) {
	counter := func(d *prometheus.Desc, n uint64, created time.Time, labels ...string) prometheus.Metric {
		return prometheus.MustNewConstMetricWithCreatedTimestamp(d, prometheus.CounterValue, float64(n), created, labels...)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	ch <- counter(pollsDesc, m.polls, m.created)
	ch <- counter(pollFailuresDesc, m.pollFailures, m.created)
	for k, c := range m.requests {
		ch <- counter(requestsDesc, c.n, c.created, k[0], k[1])
	}
	for _, ep := range client.Endpoints {
		for _, r := range client.Reasons {
			ch <- counter(requestErrorsDesc, m.errors[[2]string{string(ep), string(r)}], m.created, string(ep), string(r))
		}
		if h := m.duration[ep]; h != nil {
			ch <- h.metric(requestDurationDesc, string(ep))
		}
	}
}

// NewTargetInfo returns deployment_service_target_info, which names the service at
// redactedURL (client.RedactURL) whatever the instance label holds; page is the
// exporter's page about it, "" when unknown.
func NewTargetInfo(redactedURL, page string) prometheus.Collector {
	help := "The deployment service this answer is about, named by its base URL " +
		"(redacted: no user info, credential-like query values cut out)"
	labels := prometheus.Labels{"url": redactedURL}
	if page != "" {
		help += ", with the exporter's page about it"
		labels["page"] = page
	}
	g := prometheus.NewGauge(prometheus.GaugeOpts{Name: namespace + "_target_info", Help: help + "; always 1.", ConstLabels: labels})
	g.Set(1)
	return g
}
