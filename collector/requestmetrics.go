package collector

import (
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/deployment-service/deployment_service_exporter/client"
)

const namespace = "deployment_service"

// durationBuckets are the classic buckets, 5 ms to 30 s; from 0.1 s to 10 s
// each is at most 1.2 times the one before, for quantiles within 20%.
var durationBuckets = []float64{
	0.005, 0.01, 0.025, 0.05, 0.08,
	0.1, 0.12, 0.14, 0.16, 0.19, 0.22, 0.25, 0.3, 0.36, 0.43, 0.5, 0.6, 0.72, 0.85,
	1, 1.2, 1.4, 1.6, 1.9, 2.2, 2.5, 3, 3.6, 4.3, 5, 6, 7.2, 8.5, 10,
	15, 30,
}

// RequestMetrics counts the requests to the service of --api.url, and its polls.
type RequestMetrics struct {
	requests, errors *prometheus.CounterVec
	duration         *prometheus.HistogramVec
	pollCounts
}

// NewRequestMetrics creates the request metrics and registers them on reg.
func NewRequestMetrics(reg prometheus.Registerer) *RequestMetrics {
	m := &RequestMetrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{Name: namespace + "_requests_total",
			Help: "Requests sent to the deployment service API, by HTTP status code (none when no response came)."},
			[]string{"endpoint", "code"}),
		errors: prometheus.NewCounterVec(prometheus.CounterOpts{Name: namespace + "_request_errors_total",
			Help: "Failed requests to the deployment service API, by reason."}, []string{"endpoint", "reason"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: namespace + "_request_duration_seconds",
			Help: "Latency of each HTTP request to the deployment service API.", Buckets: durationBuckets,
			NativeHistogramBucketFactor: 1.1, NativeHistogramMaxBucketNumber: 100, NativeHistogramMinResetDuration: time.Hour,
		}, []string{"endpoint"}),
		pollCounts: newPollCounts(reg),
	}
	for _, ep := range client.Endpoints {
		for _, r := range client.Reasons {
			m.errors.WithLabelValues(string(ep), string(r))
		}
	}
	reg.MustRegister(m.requests, m.errors, m.duration)
	return m
}

// ObserveRequest implements client.Observer.
func (m *RequestMetrics) ObserveRequest(ep client.Endpoint, status int, d time.Duration) {
	code := "none" // no response came
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

// pollCounts counts one target's polls, however many scrapes shared each.
type pollCounts struct{ polls, failures prometheus.Counter }

func newPollCounts(reg prometheus.Registerer) pollCounts {
	c := pollCounts{
		polls: prometheus.NewCounter(prometheus.CounterOpts{Name: namespace + "_polls_total",
			Help: "Polls of the deployment service: one per poll, however many scrapes shared it, held-off ones included."}),
		failures: prometheus.NewCounter(prometheus.CounterOpts{Name: namespace + "_poll_failures_total",
			Help: "Polls after which deployment_service_up was 0, held-off ones included."}),
	}
	reg.MustRegister(c.polls, c.failures)
	return c
}

// ObservePoll counts a poll; up is deployment_service_up after it.
func (c pollCounts) ObservePoll(up bool) {
	c.polls.Inc()
	if !up {
		c.failures.Inc()
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
