package collector

import (
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/deployment-service/deployment_service_exporter/client"
)

// namespace prefixes every metric of the exporter.
const namespace = "deployment_service"

// RequestMetrics holds the metrics kept across scrapes about every request
// sent to the API of one service. It implements client.Observer, and
// prometheus.Collector for /probe, which serves each target's own on the
// registry of the scrape.
type RequestMetrics struct {
	duration *prometheus.HistogramVec
	requests *prometheus.CounterVec
	errors   *prometheus.CounterVec
}

var (
	_ client.Observer      = (*RequestMetrics)(nil)
	_ prometheus.Collector = (*RequestMetrics)(nil)
)

// NewRequestMetrics creates the request metrics and registers them on reg.
func NewRequestMetrics(reg prometheus.Registerer) *RequestMetrics {
	m := newRequestMetrics()
	reg.MustRegister(m)
	return m
}

func newRequestMetrics() *RequestMetrics {
	m := &RequestMetrics{
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: namespace,
			Name:      "request_duration_seconds",
			Help:      "Latency of each HTTP request to the deployment service API.",
			// Classic buckets cover a fast API up to a scrape timeout, so
			// p50/p95/p99 work on Prometheus servers without native histograms.
			Buckets:                         []float64{0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30},
			NativeHistogramBucketFactor:     1.1,
			NativeHistogramMaxBucketNumber:  100,
			NativeHistogramMinResetDuration: time.Hour,
		}, []string{"endpoint"}),
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: namespace,
			Name:      "requests_total",
			Help:      "Requests sent to the deployment service API, by HTTP status code (none when no response came).",
		}, []string{"endpoint", "code"}),
		errors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: namespace,
			Name:      "request_errors_total",
			Help:      "Failed requests to the deployment service API, by reason.",
		}, []string{"endpoint", "reason"}),
	}
	// Every endpoint × reason pair exists from the start, so rate() and
	// increase() see the first failure.
	for _, ep := range client.Endpoints {
		for _, r := range client.Reasons {
			m.errors.WithLabelValues(string(ep), string(r))
		}
	}
	return m
}

// Describe implements prometheus.Collector.
func (m *RequestMetrics) Describe(ch chan<- *prometheus.Desc) {
	m.duration.Describe(ch)
	m.requests.Describe(ch)
	m.errors.Describe(ch)
}

// Collect implements prometheus.Collector.
func (m *RequestMetrics) Collect(ch chan<- prometheus.Metric) {
	m.duration.Collect(ch)
	m.requests.Collect(ch)
	m.errors.Collect(ch)
}

// targetInfoDesc describes deployment_service_target_info.
var targetInfoDesc = prometheus.NewDesc(prometheus.BuildFQName(namespace, "", "target_info"),
	"The deployment service this answer is about, named by its base URL (redacted: no user info, credential-like query values cut out); always 1.",
	[]string{"url"}, nil)

// TargetInfo is the collector of deployment_service_target_info for one
// service, which names the service in alerts whatever the instance label
// holds.
type TargetInfo struct{ m prometheus.Metric }

var _ prometheus.Collector = (*TargetInfo)(nil)

// NewTargetInfo returns the collector for the service at the given base
// URL, already redacted (client.RedactURL).
func NewTargetInfo(redactedURL string) *TargetInfo {
	return &TargetInfo{m: prometheus.MustNewConstMetric(targetInfoDesc, prometheus.GaugeValue, 1, redactedURL)}
}

// Describe implements prometheus.Collector.
func (t *TargetInfo) Describe(ch chan<- *prometheus.Desc) { ch <- targetInfoDesc }

// Collect implements prometheus.Collector.
func (t *TargetInfo) Collect(ch chan<- prometheus.Metric) { ch <- t.m }

// ObserveRequest implements client.Observer.
func (m *RequestMetrics) ObserveRequest(ep client.Endpoint, status int, d time.Duration) {
	code := "none"
	if status != 0 {
		code = strconv.Itoa(status)
	}
	m.requests.WithLabelValues(string(ep), code).Inc()
	m.duration.WithLabelValues(string(ep)).Observe(d.Seconds())
}

// ObserveError implements client.Observer.
func (m *RequestMetrics) ObserveError(ep client.Endpoint, reason client.Reason) {
	m.errors.WithLabelValues(string(ep), string(reason)).Inc()
}
