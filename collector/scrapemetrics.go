// Package collector turns polls of the deployment service API into
// Prometheus metrics. It owns the poller (deadlines, shared polls, the
// minimum interval, hold-off), the snapshot of one poll, the per-scrape
// metric descriptors, the request metrics kept across scrapes and the HTTP
// handlers that serve them.
package collector

import (
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/deployment-service/deployment_service_exporter/client"
)

// Metrics holds the descriptors of the per-scrape metrics. They are built
// once, including the info labels chosen at start, so every scrape
// describes the same set.
type Metrics struct {
	upDesc               *prometheus.Desc
	endpointUpDesc       *prometheus.Desc
	endpointDurationDesc *prometheus.Desc
	endpointStatusDesc   *prometheus.Desc
	projectsDesc         *prometheus.Desc
	locationsDesc        *prometheus.Desc
	locationUpDesc       *prometheus.Desc
	locationDurationDesc *prometheus.Desc
	locationInfoDesc     *prometheus.Desc
	locationCheckedDesc  *prometheus.Desc
	scrapeDurationDesc   *prometheus.Desc
	pollTimestampDesc    *prometheus.Desc
	holdOffUntilDesc     *prometheus.Desc
	infoFields           []string
	// families holds the name, help and label names of each descriptor,
	// for gatherer.
	families map[*prometheus.Desc]family
}

// family is what a metric family needs beyond its samples.
type family struct {
	name, help string
	labels     []string
}

// NewMetrics builds the descriptors; infoFields become labels of
// deployment_service_location_info after location_id.
func NewMetrics(infoFields []string) *Metrics {
	families := map[*prometheus.Desc]family{}
	desc := func(name, help string, labels ...string) *prometheus.Desc {
		fq := prometheus.BuildFQName(namespace, "", name)
		d := prometheus.NewDesc(fq, help, labels, nil)
		families[d] = family{name: fq, help: help, labels: labels}
		return d
	}
	infoLabels := append([]string{"location_id"}, infoFields...)
	return &Metrics{
		families:             families,
		upDesc:               desc("up", "Whether the API root, project list and location list all answered well in this scrape (1) or not (0)."),
		endpointUpDesc:       desc("endpoint_up", "Whether the endpoint answered well in this scrape: 2xx and valid JSON of the expected shape on every page read.", "endpoint"),
		endpointDurationDesc: desc("endpoint_duration_seconds", "Wall time spent on the endpoint in this scrape, all pages together.", "endpoint"),
		endpointStatusDesc:   desc("endpoint_status_code", "HTTP status of the endpoint's last response in this scrape; 0 when none came. For location_detail: when any detail view failed, the highest status among the failed ones (0 only when none of them got a response); else 200.", "endpoint"),
		projectsDesc:         desc("projects", "Projects the key can access; absent when the list could not be read."),
		locationsDesc:        desc("locations", "Locations listed; absent when the list could not be read."),
		locationUpDesc:       desc("location_up", "Whether the location's detail view answered well at its last check.", "location_id"),
		locationDurationDesc: desc("location_detail_duration_seconds", "Time taken by the location's detail request at its last check.", "location_id"),
		locationInfoDesc:     desc("location_info", "Selected fields of the location's detail view at its last check, as labels; always 1.", infoLabels...),
		locationCheckedDesc:  desc("location_last_check_timestamp_seconds", "Unix time of the location's last check, which location_up, location_detail_duration_seconds and location_info come from.", "location_id"),
		scrapeDurationDesc:   desc("scrape_duration_seconds", "Wall time of the whole poll of the API."),
		pollTimestampDesc:    desc("poll_timestamp_seconds", "Unix time at which the poll behind this answer started."),
		holdOffUntilDesc:     desc("hold_off_until_timestamp_seconds", "Unix time until which the exporter sends the service nothing because a 429 or 503 asked it to wait (Retry-After); 0 when no hold-off is in force."),
		infoFields:           infoFields,
	}
}

// Describe sends every per-scrape descriptor.
func (m *Metrics) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{
		m.upDesc, m.endpointUpDesc, m.endpointDurationDesc, m.endpointStatusDesc,
		m.projectsDesc, m.locationsDesc, m.locationUpDesc, m.locationDurationDesc,
		m.locationInfoDesc, m.locationCheckedDesc, m.scrapeDurationDesc, m.pollTimestampDesc, m.holdOffUntilDesc,
	} {
		ch <- d
	}
}

// collector returns a collector that exposes s. It is registered on a
// registry of its own for one scrape.
func (m *Metrics) collector(s *Snapshot) prometheus.Collector {
	return &snapshotCollector{m: m, s: s}
}

type snapshotCollector struct {
	m *Metrics
	s *Snapshot
}

var _ prometheus.Collector = (*snapshotCollector)(nil)

// Describe implements prometheus.Collector.
func (c *snapshotCollector) Describe(ch chan<- *prometheus.Desc) { c.m.Describe(ch) }

// Collect implements prometheus.Collector.
func (c *snapshotCollector) Collect(ch chan<- prometheus.Metric) {
	c.each(func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
	})
}

// each hands every sample of the snapshot to emit: the one place that
// decides what a snapshot exposes, for Collect and for gatherer alike.
func (c *snapshotCollector) each(emit func(d *prometheus.Desc, v float64, labels ...string)) {
	m, s := c.m, c.s
	emit(m.upDesc, boolValue(s.up()))
	for _, ep := range client.Endpoints {
		st, ok := s.Endpoints[ep]
		if !ok {
			continue
		}
		emit(m.endpointUpDesc, boolValue(st.ok()), string(ep))
		emit(m.endpointDurationDesc, st.Duration.Seconds(), string(ep))
		emit(m.endpointStatusDesc, float64(st.Status), string(ep))
	}
	// A list that could not be read has no count: absent, never zero.
	if s.Projects.Known {
		emit(m.projectsDesc, float64(s.Projects.Value))
	}
	if s.Locations.Known {
		emit(m.locationsDesc, float64(s.Locations.Value))
	}
	for _, d := range s.Details {
		id := strconv.FormatInt(d.ID, 10)
		emit(m.locationUpDesc, boolValue(d.Err == nil), id)
		emit(m.locationDurationDesc, d.Duration.Seconds(), id)
		emit(m.locationCheckedDesc, float64(d.Checked.UnixMilli())/1e3, id)
		if d.Err == nil {
			labels := make([]string, 0, 1+len(m.infoFields))
			labels = append(labels, id)
			for _, f := range m.infoFields {
				labels = append(labels, labelValue(d.Fields[f]))
			}
			emit(m.locationInfoDesc, 1, labels...)
		}
	}
	emit(m.scrapeDurationDesc, s.Duration.Seconds())
	emit(m.pollTimestampDesc, float64(s.Start.UnixNano())/1e9)
	holdOff := 0.0
	if !s.HoldOffUntil.IsZero() {
		holdOff = float64(s.HoldOffUntil.UnixMilli()) / 1e3
	}
	emit(m.holdOffUntilDesc, holdOff)
}

// gatherer returns the metric families of s, built straight from the
// snapshot. It does what a registry of the collector would, without the
// registry: registering and gathering one per scrape cost two buffered
// channels of a thousand metrics, most of an exposition's allocations.
// The families come unsorted; prometheus.Gatherers sorts what it merges.
func (m *Metrics) gatherer(s *Snapshot) prometheus.Gatherer {
	return prometheus.GathererFunc(func() ([]*dto.MetricFamily, error) {
		byDesc := make(map[*prometheus.Desc]*dto.MetricFamily, len(m.families))
		var out []*dto.MetricFamily
		(&snapshotCollector{m: m, s: s}).each(func(d *prometheus.Desc, v float64, labels ...string) {
			f := m.families[d]
			mf, ok := byDesc[d]
			if !ok {
				mf = &dto.MetricFamily{Name: &f.name, Help: &f.help, Type: dto.MetricType_GAUGE.Enum()}
				byDesc[d] = mf
				out = append(out, mf)
			}
			metric := &dto.Metric{Gauge: &dto.Gauge{Value: &v}}
			if len(labels) > 0 {
				metric.Label = make([]*dto.LabelPair, len(labels))
				for i, l := range labels {
					metric.Label[i] = &dto.LabelPair{Name: &f.labels[i], Value: &l}
				}
				slices.SortFunc(metric.Label, func(a, b *dto.LabelPair) int { return strings.Compare(a.GetName(), b.GetName()) })
			}
			mf.Metric = append(mf.Metric, metric)
		})
		return out, nil
	})
}

// labelValue makes text from the service fit for a label value, whatever
// it sent: valid UTF-8, with U+FFFD for each control character but the
// line feed, which the exposition formats escape.
func labelValue(s string) string {
	return strings.Map(func(r rune) rune {
		if r != '\n' && (r < 0x20 || r >= 0x7f && r <= 0x9f) {
			return utf8.RuneError
		}
		return r
	}, s)
}

func boolValue(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
