// Package collector turns polls of the deployment service API into Prometheus metrics.
package collector

import (
	"errors"
	"slices"
	"strconv"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/deployment-service/deployment_service_exporter/client"
)

// Metrics describes the per-scrape gauges, the info labels chosen at start included.
type Metrics struct {
	up, endpointUp, endpointDuration, endpointStatus, projects, locations *family
	locationUp, locationDuration, locationInfo, locationChecked           *family
	scrapeDuration, pollTimestamp, holdOffUntil, failureInfo              *family
}

// family is the name, help and label names of one gauge family.
type family struct {
	name, help string
	labels     []string
}

// NewMetrics describes the gauges; infoFields become labels of
// deployment_service_location_info after location_id.
func NewMetrics(infoFields []string) *Metrics {
	f := func(name, help string, labels ...string) *family {
		return &family{name: namespace + "_" + name, help: help, labels: labels}
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
	}
}

// each hands every sample of s to emit.
func (m *Metrics) each(s *Snapshot, emit func(f *family, v float64, labels ...string)) {
	emit(m.up, boolValue(s.up()))
	for _, ep := range client.Endpoints {
		if st, ok := s.Endpoints[ep]; ok {
			emit(m.endpointUp, boolValue(st.ok()), string(ep))
			emit(m.endpointDuration, st.Duration.Seconds(), string(ep))
			emit(m.endpointStatus, float64(st.Status), string(ep))
			if !st.ok() {
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
		emit(m.locationUp, boolValue(d.Err == nil), id)
		emit(m.locationDuration, d.Duration.Seconds(), id)
		emit(m.locationChecked, float64(d.Checked.UnixMilli())/1e3, id)
		if d.Err == nil {
			fields := m.locationInfo.labels[1:] // the info fields, after location_id
			labels := append(make([]string, 0, 1+len(fields)), id)
			for _, f := range fields {
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
}

// gatherer returns the families of s, built without a registry, which would
// cost most of an exposition's allocations. prometheus.Gatherers sorts them.
func (m *Metrics) gatherer(s *Snapshot) prometheus.Gatherer {
	return prometheus.GathererFunc(func() ([]*dto.MetricFamily, error) {
		byFamily := make(map[*family]*dto.MetricFamily)
		var out []*dto.MetricFamily
		m.each(s, func(f *family, v float64, labels ...string) {
			mf := byFamily[f]
			if mf == nil {
				mf = &dto.MetricFamily{Name: &f.name, Help: &f.help, Type: dto.MetricType_GAUGE.Enum()}
				byFamily[f] = mf
				out = append(out, mf)
			}
			metric := &dto.Metric{Gauge: &dto.Gauge{Value: &v}}
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

func boolValue(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
