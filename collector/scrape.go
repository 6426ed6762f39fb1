// Package collector turns polls of the deployment service API into Prometheus metrics.
package collector

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net/http"
	"net/url"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	// zstd answers Prometheus 3's zstd-scrape feature.
	_ "github.com/prometheus/client_golang/prometheus/promhttp/zstd"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/config"
	"github.com/prometheus/common/expfmt"
	"go.yaml.in/yaml/v2"

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
	order      []int // the labels' indices, by name, as the exposition wants them
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
		order := make([]int, len(labels))
		for i := range order {
			order[i] = i
		}
		slices.SortFunc(order, func(a, b int) int { return strings.Compare(labels[a], labels[b]) })
		return &family{name: namespace + "_" + name, help: help, labels: labels, order: order, typ: dto.MetricType_GAUGE}
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
	emit(m.holdOffUntil, max(float64(s.HoldOffUntil.UnixMilli())/1e3, 0)) // 0 for none: the zero time is before 1970
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
			metric := &dto.Metric{}
			if f.typ == dto.MetricType_COUNTER {
				metric.Counter = &dto.Counter{Value: &v}
			} else {
				metric.Gauge = &dto.Gauge{Value: &v}
			}
			for _, i := range f.order {
				if labels[i] != "" { // an empty label is no label
					metric.Label = append(metric.Label, &dto.LabelPair{Name: &f.labels[i], Value: &labels[i]})
				}
			}
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
	case client.ReasonOf(err) != "":
		return string(client.ReasonOf(err)), client.CauseOf(err)
	}
	return "not_checked", "" // never sent: no detail view checked, no key, a dropped pair
}

var boolValue = map[bool]float64{true: 1}

const namespace = "deployment_service"

const scrapeTimeoutHeader = "X-Prometheus-Scrape-Timeout-Seconds"

// NewHandler serves /metrics: longLived and, unless p is nil, a poll of p within the scrape's budget and timeout.
func NewHandler(p *Poller, m *Metrics, t *TargetStats, longLived prometheus.Gatherer, timeout time.Duration, logger *slog.Logger) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		g := prometheus.Gatherers{longLived}
		if p != nil {
			ctx, cancel := scrapeContext(r, timeout)
			defer cancel()
			g = append(g, m.gatherer(p.Poll(ctx), t))
		}
		serveGatherer(w, r, g, logger)
	})
}

// serveGatherer writes g's metrics; a failure to send them to a scrape that Prometheus has given up is logged at debug level only.
func serveGatherer(w http.ResponseWriter, r *http.Request, g prometheus.Gatherer, logger *slog.Logger) {
	promhttp.HandlerFor(g, promhttp.HandlerOpts{
		ErrorLog: errorLog(func(v ...any) {
			level := slog.LevelError
			if r.Context().Err() != nil {
				level = slog.LevelDebug
			}
			logger.Log(context.Background(), level, "Cannot serve metrics", "err", strings.TrimSpace(fmt.Sprintln(v...)))
		}),
		ErrorHandling:     promhttp.ContinueOnError,
		EnableOpenMetrics: true,
		// zstd first: promhttp breaks the tie in Prometheus's "zstd,gzip" by this order.
		OfferedCompressions: []promhttp.Compression{promhttp.Zstd, promhttp.Gzip, promhttp.Identity},
	}).ServeHTTP(w, r)
}

type errorLog func(v ...any)

func (f errorLog) Println(v ...any) { f(v...) }

func scrapeContext(r *http.Request, limit time.Duration) (context.Context, context.CancelFunc) {
	ctx := context.WithValue(r.Context(), scrapeTimeoutKey{}, r.Header.Get(scrapeTimeoutHeader)) // names the limit a poll reaches
	return context.WithTimeout(ctx, scrapeBudget(r, limit))
}

// scrapeBudget is the scrape timeout of r less a margin to encode and send the answer, at most limit.
func scrapeBudget(r *http.Request, limit time.Duration) time.Duration {
	secs, err := strconv.ParseFloat(r.Header.Get(scrapeTimeoutHeader), 64)
	if err != nil || !(secs > 0 && secs <= 1e6) { // NaN too
		return limit
	}
	t := time.Duration(secs * float64(time.Second))
	margin := min(max(t/10, 50*time.Millisecond), 500*time.Millisecond)
	return min(max(t-margin, t/2), limit)
}

// maxProbeTargets bounds the pairs /probe keeps; the least recently used goes first.
const maxProbeTargets = 1000

// ProbeModule is what /probe needs of a module: Version tells a changed module, CheckTarget refuses a target (nil allows any).
type ProbeModule struct {
	Settings    TargetSettings
	Version     any
	CheckTarget func(target *url.URL) error
}

// ProbeHandler serves /probe?target=<base URL>&module=<name> from one poller per target and module.
// Set before serving: ExternalURL, where target_info links point, and HoldOffs, which outlive the pairs.
type ProbeHandler struct {
	lookup      func(name string) (ProbeModule, error)
	recent      *PollLog
	logger      *slog.Logger
	ExternalURL *url.URL
	HoldOffs    *client.HoldOffs

	mu      sync.Mutex
	pollers map[targetKey]*probeEntry
	modules map[string]*probeModule
}

// probeModule is what one module's targets share.
type probeModule struct {
	version   any
	transport *client.Transport
	metrics   *Metrics
	http      config.HTTPClientConfig
}

// probeEntry is one target and module pair; its counters live while the cache keeps the pair.
type probeEntry struct {
	target   *url.URL
	module   *probeModule
	poller   *Poller
	stats    *TargetStats
	lastUsed time.Time
}

// NewProbeHandler returns a /probe handler; lookup finds a module by name (its error is the 400's reason); recent may be nil.
func NewProbeHandler(lookup func(name string) (ProbeModule, error), recent *PollLog, logger *slog.Logger) *ProbeHandler {
	return &ProbeHandler{
		lookup: lookup, recent: cmp.Or(recent, NewPollLog()), logger: cmp.Or(logger, slog.New(slog.DiscardHandler)), HoldOffs: client.NewHoldOffs(),
		pollers: make(map[targetKey]*probeEntry), modules: make(map[string]*probeModule),
	}
}

func (h *ProbeHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	e, m, status, err := h.pair(q.Get("target"), q.Get("module"))
	if err != nil {
		http.Error(w, err.Error(), status)
		return
	}
	ctx, cancel := scrapeContext(r, e.poller.opts.Timeout)
	defer cancel()
	snap := e.poller.Poll(ctx)
	g := prometheus.Gatherers{e.module.metrics.gatherer(snap, e.stats)}
	if q.Get("debug") == "true" {
		h.writeDebug(w, e.poller.opts, m.Settings, snap, g)
		return
	}
	serveGatherer(w, r, g, h.logger)
}

// writeDebug answers ?debug=true as blackbox does: the module's settings in the file's YAML keys, the poll's record, its metrics.
func (h *ProbeHandler) writeDebug(w http.ResponseWriter, o PollerOptions, s TargetSettings, sn *Snapshot, g prometheus.Gatherer) {
	c := s.Client.WithDefaults()
	settings, _ := yaml.Marshal(map[string]any{"http_client_config": c.HTTPClientConfig, "timeout": s.Timeout, "concurrency": c.Concurrency,
		"max_pages": c.MaxPages, "max_response_bytes": c.MaxResponseBytes, "rate_limit": c.RateLimit, "gzip": !c.DisableGzip,
		"min_interval": s.MinInterval, "locations": map[string]any{"detail_ids": s.DetailIDs, "detail_limit": s.DetailLimit, "info_fields": s.InfoFields}})
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	fmt.Fprintf(w, "Module %s (the scrape timeout header lowers its timeout):\n%s\n", o.Module, settings)
	_ = h.recent.recordOf(o.Name, o.Module, sn).WriteText(w)
	fmt.Fprint(w, "\nMetrics this probe would have returned:\n\n")
	mfs, _ := g.Gather() // a snapshot's families, which never fail
	for _, mf := range mfs {
		_, _ = expfmt.MetricFamilyToText(w, mf)
	}
}

// pair returns the pair of target and module, or a refusal, under h.mu so that no Prune comes between.
func (h *ProbeHandler) pair(rawTarget, module string) (*probeEntry, ProbeModule, int, error) {
	target, err := client.ParseTarget(rawTarget) // its errors never repeat the target
	switch {
	case rawTarget == "":
		return nil, ProbeModule{}, http.StatusBadRequest, errors.New("target parameter is missing: give the service's base URL, such as target=https://deploy.example.com")
	case errors.Is(err, client.ErrURLCredentials):
		return nil, ProbeModule{}, http.StatusBadRequest, fmt.Errorf("target: %w: the key comes from the module's authorization", err)
	case err != nil:
		return nil, ProbeModule{}, http.StatusBadRequest, fmt.Errorf("target: %w", err)
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	m, err := h.lookup(module)
	if err != nil {
		return nil, m, http.StatusBadRequest, err
	}
	name, module := client.RedactURL(target), cmp.Or(module, "default")
	if m.CheckTarget != nil {
		if err := m.CheckTarget(target); err != nil {
			h.logger.Debug("Target refused", "target", name, "module", module, "err", err)
			return nil, m, http.StatusForbidden, fmt.Errorf("module %q may not be used with target %s: %w", module, name, err)
		}
	}
	key := targetKey{target: target.String(), module: module}
	old, ok := h.pollers[key]
	if ok && reflect.DeepEqual(old.module.version, m.Version) {
		old.lastUsed = time.Now()
		return old, m, 0, nil
	} else if ok {
		old.retire(!old.allowedBy(m))
	}
	e, err := h.newEntry(target, name, key.module, m, old)
	if err != nil {
		return nil, m, http.StatusBadRequest, fmt.Errorf("module %q cannot poll this target: %s", key.module, strings.ReplaceAll(err.Error(), "\n", " "))
	}
	if !ok && len(h.pollers) >= maxProbeTargets {
		oldest := slices.MinFunc(slices.Collect(maps.Keys(h.pollers)), func(a, b targetKey) int {
			return h.pollers[a].lastUsed.Compare(h.pollers[b].lastUsed)
		})
		h.pollers[oldest].retire(false)
		delete(h.pollers, oldest)
	}
	h.pollers[key] = e
	return e, m, 0, nil
}

// newEntry builds the pair of target, named so once redacted, and module m; it takes over old's counters and checks.
func (h *ProbeHandler) newEntry(target *url.URL, name, module string, m ProbeModule, old *probeEntry) (*probeEntry, error) {
	shared, ok := h.modules[module]
	if !ok || !reflect.DeepEqual(shared.version, m.Version) {
		t, err := client.NewTransport(m.Settings.Client.HTTPClientConfig, m.Settings.Client.UserAgent)
		if err != nil {
			return nil, err
		}
		shared = &probeModule{version: m.Version, transport: t, metrics: NewMetrics(m.Settings.InfoFields), http: m.Settings.Client.HTTPClientConfig}
		h.modules[module] = shared
	}
	e := &probeEntry{target: target, module: shared, lastUsed: time.Now()}
	if old != nil {
		e.stats = old.stats // the counters live as long as the pair is cached
	} else {
		e.stats = NewTargetStats(name, TargetPage(h.ExternalURL, name, module))
	}
	// A pool of its own, emptied when each poll ends: as blackbox_exporter's, no connection waits between probes.
	t, err := shared.transport.WithOwnPool()
	if err != nil {
		return nil, err
	}
	s := m.Settings
	s.Client.Transport, s.Client.HoldOffs = t, h.HoldOffs
	e.poller, err = NewTargetPoller(target, s, PollerOptions{
		Logger: h.logger.With("target", bounded(name, 160), "module", module), Recent: h.recent, Name: name, Module: module,
		Polls: e.stats, TimeoutName: fmt.Sprintf("the timeout of module %q", module), AfterPoll: t.CloseIdle,
	})
	if err == nil && old != nil {
		e.poller.takeLocations(old.poller)
	}
	return e, err
}

// Prune drops the pairs a reload no longer allows, cancelling their polls; those of changed modules are replaced at their next use.
func (h *ProbeHandler) Prune() {
	h.mu.Lock()
	defer h.mu.Unlock()
	for key, e := range h.pollers {
		if m, err := h.lookup(key.module); err != nil || !e.allowedBy(m) {
			e.retire(true)
			delete(h.pollers, key)
		}
	}
	for name, m := range h.modules {
		if l, err := h.lookup(name); err != nil || !reflect.DeepEqual(m.version, l.Version) {
			delete(h.modules, name)
		}
	}
}

// retire closes e's idle connections; revoke cancels its poll in flight too.
func (e *probeEntry) retire(revoke bool) {
	if revoke {
		e.poller.stop()
	}
	e.poller.target.Client.Close()
}

// allowedBy tells whether m still allows e: its target, with the same credentials (CONTRACT.md, "Credentials").
func (e *probeEntry) allowedBy(m ProbeModule) bool {
	creds := func(c config.HTTPClientConfig) []any {
		t := c.TLSConfig
		return []any{c.Authorization, c.BasicAuth, c.OAuth2, c.BearerToken, c.BearerTokenFile, c.HTTPHeaders,
			t.Cert, t.CertFile, t.Key, t.KeyFile, c.ProxyURL, c.NoProxy, c.ProxyFromEnvironment, c.ProxyConnectHeader}
	}
	return (m.CheckTarget == nil || m.CheckTarget(e.target) == nil) &&
		reflect.DeepEqual(creds(e.module.http), creds(m.Settings.Client.HTTPClientConfig))
}

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
