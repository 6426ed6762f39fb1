// Package collector turns polls of the deployment service API into
// Prometheus metrics. It owns the poller (deadlines, shared polls, the
// minimum interval, hold-off), the snapshot of one poll, the per-scrape
// metric descriptors, the request metrics kept across scrapes and the HTTP
// handlers that serve them.
package collector

import (
	"strconv"
	"strings"

	"github.com/prometheus/client_golang/prometheus"

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
}

// NewMetrics builds the descriptors; infoFields become labels of
// deployment_service_location_info after location_id.
func NewMetrics(infoFields []string) *Metrics {
	desc := func(name, help string, labels ...string) *prometheus.Desc {
		return prometheus.NewDesc(prometheus.BuildFQName(namespace, "", name), help, labels, nil)
	}
	infoLabels := append([]string{"location_id"}, infoFields...)
	return &Metrics{
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
	m, s := c.m, c.s
	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
	}
	gauge(m.upDesc, boolValue(s.up()))
	for _, ep := range client.Endpoints {
		st, ok := s.Endpoints[ep]
		if !ok {
			continue
		}
		gauge(m.endpointUpDesc, boolValue(st.ok()), string(ep))
		gauge(m.endpointDurationDesc, st.Duration.Seconds(), string(ep))
		gauge(m.endpointStatusDesc, float64(st.Status), string(ep))
	}
	// A list that could not be read has no count: absent, never zero.
	if s.Projects.Known {
		gauge(m.projectsDesc, float64(s.Projects.Value))
	}
	if s.Locations.Known {
		gauge(m.locationsDesc, float64(s.Locations.Value))
	}
	for _, d := range s.Details {
		id := strconv.FormatInt(d.ID, 10)
		gauge(m.locationUpDesc, boolValue(d.Err == nil), id)
		gauge(m.locationDurationDesc, d.Duration.Seconds(), id)
		gauge(m.locationCheckedDesc, float64(d.Checked.UnixMilli())/1e3, id)
		if d.Err == nil {
			labels := make([]string, 0, 1+len(m.infoFields))
			labels = append(labels, id)
			for _, f := range m.infoFields {
				// A label value must be valid UTF-8, whatever the service sent.
				labels = append(labels, strings.ToValidUTF8(d.Fields[f], "\uFFFD"))
			}
			gauge(m.locationInfoDesc, 1, labels...)
		}
	}
	gauge(m.scrapeDurationDesc, s.Duration.Seconds())
	gauge(m.pollTimestampDesc, float64(s.Start.UnixNano())/1e9)
	holdOff := 0.0
	if !s.HoldOffUntil.IsZero() {
		holdOff = float64(s.HoldOffUntil.UnixMilli()) / 1e3
	}
	gauge(m.holdOffUntilDesc, holdOff)
}

func boolValue(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
