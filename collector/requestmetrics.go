package collector

import (
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/deployment-service/deployment_service_exporter/client"
)

const namespace = "deployment_service"

// durationBuckets run from 5 ms to 30 s, at most 1.2 apart from 0.1 s to 10 s: quantiles within 20%.
var durationBuckets = []float64{0.005, 0.01, 0.025, 0.05, 0.08, 0.1, 0.12, 0.14, 0.16, 0.19, 0.22, 0.25, 0.3,
	0.36, 0.43, 0.5, 0.6, 0.72, 0.85, 1, 1.2, 1.4, 1.6, 1.9, 2.2, 2.5, 3, 3.6, 4.3, 5, 6, 7.2, 8.5, 10, 15, 30}

// RequestMetrics counts the requests to the service of --api.url.
type RequestMetrics struct {
	requests, errors *prometheus.CounterVec
	duration         *prometheus.HistogramVec
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
