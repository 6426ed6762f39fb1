package collector

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"math"
	"net/http"
	"net/url"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	// zstd answers Prometheus 3's zstd-scrape feature.
	_ "github.com/prometheus/client_golang/prometheus/promhttp/zstd"
	"github.com/prometheus/common/config"
	"github.com/prometheus/common/expfmt"
	"go.yaml.in/yaml/v2"

	"github.com/deployment-service/deployment_service_exporter/client"
)

// maxProbeTargets bounds the pairs /probe keeps; the least recently used goes first.
const maxProbeTargets = 1000

// ProbeModule is what /probe needs of a module: Version tells a changed module on reload,
// and CheckTarget says why it may not be used with a target (nil allows any).
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
	target, err := client.ParseTarget(q.Get("target")) // its errors never repeat the target
	switch {
	case q.Get("target") == "":
		err = errors.New("target parameter is missing: give the service's base URL, such as target=https://deploy.example.com")
	case errors.Is(err, client.ErrURLCredentials):
		err = fmt.Errorf("target: %w: the key comes from the module's authorization", err)
	case err != nil:
		err = fmt.Errorf("target: %w", err)
	}
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	e, m, status, err := h.pair(target, q.Get("module"))
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

// writeDebug answers ?debug=true as blackbox's debug view does: the module's settings as YAML in the file's keys
// (secrets as <secret>), the poll's record, and the metrics the probe would have returned.
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
func (h *ProbeHandler) pair(target *url.URL, module string) (*probeEntry, ProbeModule, int, error) {
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
		err = fmt.Errorf("module %q cannot poll this target: %s", key.module, strings.ReplaceAll(err.Error(), "\n", " "))
		return nil, m, http.StatusBadRequest, err
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
	if e.stats = NewTargetStats(name, TargetPage(h.ExternalURL, name, module)); old != nil {
		e.stats = old.stats // the counters live as long as the pair is cached
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
	if err != nil || math.IsNaN(secs) || secs <= 0 || secs > 1e6 {
		return limit
	}
	t := time.Duration(secs * float64(time.Second))
	margin := min(max(t/10, 50*time.Millisecond), 500*time.Millisecond)
	return min(max(t-margin, t/2), limit)
}
