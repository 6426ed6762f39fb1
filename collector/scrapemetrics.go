// Package collector turns polls of the deployment service API into Prometheus metrics.
package collector

import (
	"errors"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/deployment-service/deployment_service_exporter/client"
)

// Metrics describes the families of an answer, the info labels chosen at start included.
type Metrics struct {
	up, endpointUp, endpointDuration, endpointStatus, projects, locations *family
	locationUp, locationDuration, locationInfo, locationChecked           *family
	scrapeDuration, pollTimestamp, holdOffUntil, failureInfo              *family
	targetInfo, polls, pollFailures                                       *family
}

type family struct {
	name, help string
	labels     []string
	typ        dto.MetricType
}

// TargetStats names a target in its answers and counts its polls, however many scrapes shared each.
type TargetStats struct {
	url, page       string
	polls, failures atomic.Uint64
}

// NewTargetStats names the service at redactedURL (client.RedactURL); page is the exporter's page about it, "" when unknown.
func NewTargetStats(redactedURL, page string) *TargetStats {
	return &TargetStats{url: redactedURL, page: page}
}

// ObservePoll counts a poll; up is deployment_service_up after it.
func (t *TargetStats) ObservePoll(up bool) {
	t.polls.Add(1)
	if !up {
		t.failures.Add(1)
	}
}

// NewMetrics describes the families; infoFields become labels of location_info after location_id.
func NewMetrics(infoFields []string) *Metrics {
	f := func(name, help string, labels ...string) *family {
		return &family{name: namespace + "_" + name, help: help, labels: labels, typ: dto.MetricType_GAUGE}
	}
	return &Metrics{
		up:               f("up", "Whether the API root, project list and location list all answered well in this scrape (1) or not (0)."),
		endpointUp:       f("endpoint_up", "Whether the endpoint answered well in this scrape: 2xx and valid JSON of the expected shape on every page read.", "endpoint"),
		endpointDuration: f("endpoint_duration_seconds", "Wall time spent on the endpoint in this scrape, all pages together.", "endpoint"),
		endpointStatus:   f("endpoint_status_code", "HTTP status of the endpoint's last response in this scrape; 0 when none came. For location_detail: when any detail view failed, the highest status among the failed ones (0 only when none of them got a response); else 200.", "endpoint"),
		projects:         f("projects", "Projects the key can access; absent when the list could not be read."),
		locations:        f("locations", "Locations listed; absent when the list could not be read."),
		locationUp:       f("location_up", "Whether the location's detail view answered well at its last check.", "location_id"),
		locationDuration: f("location_detail_duration_seconds", "Time taken by the location's detail request at its last check.", "location_id"),
		locationInfo:     f("location_info", "Selected fields of the location's detail view at its last check, as labels; always 1.", append([]string{"location_id"}, infoFields...)...),
		locationChecked:  f("location_last_check_timestamp_seconds", "Unix time of the location's last check, which location_up, location_detail_duration_seconds and location_info come from.", "location_id"),
		scrapeDuration:   f("scrape_duration_seconds", "Wall time of the whole poll of the API."),
		pollTimestamp:    f("poll_timestamp_seconds", "Unix time at which the poll behind this answer started."),
		holdOffUntil:     f("hold_off_until_timestamp_seconds", "Unix time until which the exporter sends the service nothing because a 429 or 503 asked it to wait (Retry-After); 0 when no hold-off is in force."),
		failureInfo:      f("endpoint_failure_info", "Why the endpoint was down in this scrape: the failure reason (or held_off, not_checked) and, for network failures and timeouts, their cause; always 1.", "endpoint", "reason", "cause"),
		targetInfo:       f("target_info", "The deployment service this answer is about, named by its base URL (redacted: no user info, credential-like query values cut out), with the exporter's page about it if known; always 1.", "url", "page"),
		polls:            &family{name: namespace + "_polls_total", help: "Polls of the deployment service: one per poll, however many scrapes shared it, held-off ones included.", typ: dto.MetricType_COUNTER},
		pollFailures:     &family{name: namespace + "_poll_failures_total", help: "Polls after which deployment_service_up was 0, held-off ones included.", typ: dto.MetricType_COUNTER},
	}
}

func (m *Metrics) each(s *Snapshot, t *TargetStats, emit func(f *family, v float64, labels ...string)) {
	emit(m.up, boolValue[s.up()])
	for _, ep := range client.Endpoints {
		if st, ok := s.Endpoints[ep]; ok {
			emit(m.endpointUp, boolValue[st.Err == nil], string(ep))
			emit(m.endpointDuration, st.Duration.Seconds(), string(ep))
			emit(m.endpointStatus, float64(st.Status), string(ep))
			if st.Err != nil {
				reason, cause := reasonAndCause(st.Err)
				emit(m.failureInfo, 1, string(ep), reason, cause)
			}
		}
	}
	// A list that could not be read has no count: absent, never zero.
	if s.Projects.Known {
		emit(m.projects, float64(s.Projects.Value))
	}
	if s.Locations.Known {
		emit(m.locations, float64(s.Locations.Value))
	}
	for _, d := range s.Details {
		id := strconv.FormatInt(d.ID, 10)
		emit(m.locationUp, boolValue[d.Err == nil], id)
		emit(m.locationDuration, d.Duration.Seconds(), id)
		emit(m.locationChecked, float64(d.Checked.UnixMilli())/1e3, id)
		if d.Err == nil {
			labels := []string{id}
			for _, f := range m.locationInfo.labels[1:] { // the info fields, after location_id
				labels = append(labels, d.Fields[f])
			}
			emit(m.locationInfo, 1, labels...)
		}
	}
	emit(m.scrapeDuration, s.Duration.Seconds())
	emit(m.pollTimestamp, float64(s.Start.UnixNano())/1e9)
	holdOff := 0.0
	if !s.HoldOffUntil.IsZero() {
		holdOff = float64(s.HoldOffUntil.UnixMilli()) / 1e3
	}
	emit(m.holdOffUntil, holdOff)
	if t != nil {
		emit(m.targetInfo, 1, t.url, t.page)
		emit(m.polls, float64(t.polls.Load()))
		emit(m.pollFailures, float64(t.failures.Load()))
	}
}

// gatherer returns the families of s and t, built without a registry, which would cost most allocations.
func (m *Metrics) gatherer(s *Snapshot, t *TargetStats) prometheus.Gatherer {
	return prometheus.GathererFunc(func() ([]*dto.MetricFamily, error) {
		byFamily := make(map[*family]*dto.MetricFamily)
		var out []*dto.MetricFamily
		m.each(s, t, func(f *family, v float64, labels ...string) {
			mf := byFamily[f]
			if mf == nil {
				mf = &dto.MetricFamily{Name: &f.name, Help: &f.help, Type: f.typ.Enum()}
				byFamily[f] = mf
				out = append(out, mf)
			}
			metric := &dto.Metric{Gauge: &dto.Gauge{Value: &v}}
			if f.typ == dto.MetricType_COUNTER {
				metric = &dto.Metric{Counter: &dto.Counter{Value: &v}}
			}
			for i, l := range labels {
				if l != "" { // an empty label is no label
					metric.Label = append(metric.Label, &dto.LabelPair{Name: &f.labels[i], Value: &l})
				}
			}
			slices.SortFunc(metric.Label, func(a, b *dto.LabelPair) int { return strings.Compare(a.GetName(), b.GetName()) })
			mf.Metric = append(mf.Metric, metric)
		})
		return out, nil
	})
}

// reasonAndCause are the labels of endpoint_failure_info for an endpoint's error.
func reasonAndCause(err error) (reason, cause string) {
	switch {
	case errors.Is(err, client.ErrHeldOff):
		return "held_off", ""
	case errors.Is(err, errTooLate):
		return string(client.ReasonTimeout), client.CauseTimeout
	case client.ReasonOf(err) != "":
		return string(client.ReasonOf(err)), client.CauseOf(err)
	}
	return "not_checked", "" // never sent: no detail view checked, no key, a dropped pair
}

var boolValue = map[bool]float64{true: 1}

const namespace = "deployment_service"

// durationBuckets run from 5 ms to 30 s, at most 1.2 apart from 0.1 s to 10 s: quantiles within 20%.
var durationBuckets = []float64{0.005, 0.01, 0.025, 0.05, 0.08, 0.1, 0.12, 0.14, 0.16, 0.19, 0.22, 0.25, 0.3,
	0.36, 0.43, 0.5, 0.6, 0.72, 0.85, 1, 1.2, 1.4, 1.6, 1.9, 2.2, 2.5, 3, 3.6, 4.3, 5, 6, 7.2, 8.5, 10, 15, 30}

// RequestMetrics counts the requests to the service of --api.url.
type RequestMetrics struct {
	requests, errors *prometheus.CounterVec
	duration         *prometheus.HistogramVec
}

// NewRequestMetrics registers the request metrics on reg; they implement client.Observer.
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

func (m *RequestMetrics) ObserveRequest(ep client.Endpoint, status int, d time.Duration) {
	code := "none" // no response came
	if status != 0 {
		code = strconv.Itoa(status)
	}
	m.requests.WithLabelValues(string(ep), code).Inc()
	m.duration.WithLabelValues(string(ep)).Observe(d.Seconds())
}

func (m *RequestMetrics) ObserveError(ep client.Endpoint, reason client.Reason) {
	m.errors.WithLabelValues(string(ep), string(reason)).Inc()
}
