package collector

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"reflect"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/common/expfmt"

	"github.com/deployment-service/deployment_service_exporter/client"
)

// maxProbeTargets bounds the pollers kept for /probe, since targets come
// from requests; the least recently used one goes first.
const maxProbeTargets = 1000

// ModuleLookup finds a module by name; its error is the 400's reason.
type ModuleLookup func(name string) (ProbeModule, error)

// ProbeModule is what /probe needs of a module.
type ProbeModule struct {
	Settings TargetSettings
	// Version describes the module (compared with reflect.DeepEqual), so
	// that a reload replaces the pollers of changed modules only: the
	// others keep their hold-off, minimum interval and last poll.
	Version any
	// CheckTarget says why the module may not be used with a target, in
	// /probe's spelling, or returns nil when it may; nil allows any.
	// It guards the module's credentials: a refused target is sent
	// nothing.
	CheckTarget func(target *url.URL) error
}

// ProbeHandler serves /probe?target=<base URL>&module=<name>: a poll of any
// service on a registry of its own, with the families that /metrics has
// for its service, the exporter's own (deployment_service_exporter_*, go_*,
// process_*, promhttp_*) left out. It keeps one poller per target and
// module, so min interval, hold-off and shared polls apply to each of
// them as they do to /metrics, and so do the request counters and
// histogram: counted since the pair was first probed, until it leaves the
// cache.
type ProbeHandler struct {
	lookup ModuleLookup
	recent *PollLog
	logger *slog.Logger
	// maxTargets is maxProbeTargets, lowered by tests.
	maxTargets int
	// ExternalURL, when set, is where people reach the exporter: each
	// target's deployment_service_target_info links to its debug view
	// there. Set it before serving.
	ExternalURL *url.URL
	// HoldOffs keeps the hold-offs of every pair's origin, so that a pair
	// dropped from the cache forgets none. NewProbeHandler sets one; give
	// the /metrics client's instead before serving, to share it.
	HoldOffs *client.HoldOffs

	mu      sync.Mutex
	pollers map[probeKey]*probeEntry
	modules map[string]*probeModule
	// books keeps the location checks of pairs that a reload replaced,
	// until the pair is built again: the locations still in its subset
	// keep their last results.
	books map[probeKey]keptLocations
}

type probeKey struct{ target, module string }

// probeModule is what the targets of one module share: the transport with
// its connections, TLS settings and key source, and the descriptors of
// the per-scrape metrics.
type probeModule struct {
	version   any
	transport *client.Transport
	metrics   *Metrics
}

// probeEntry is one target × module pair: its poller and the metrics
// kept across its scrapes.
type probeEntry struct {
	version  any
	poller   *Poller
	metrics  *Metrics
	requests *RequestMetrics
	info     *TargetInfo
	timeout  time.Duration
	lastUsed time.Time
}

// NewProbeHandler returns a /probe handler; recent may be nil.
func NewProbeHandler(lookup ModuleLookup, recent *PollLog, logger *slog.Logger) *ProbeHandler {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	return &ProbeHandler{
		lookup: lookup, recent: recent, logger: logger, maxTargets: maxProbeTargets, HoldOffs: client.NewHoldOffs(),
		pollers: make(map[probeKey]*probeEntry), modules: make(map[string]*probeModule),
		books: make(map[probeKey]keptLocations),
	}
}

// ServeHTTP implements http.Handler.
func (h *ProbeHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	target, err := parseTarget(q.Get("target"))
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	module := q.Get("module")
	e, m, status, err := h.pair(target, module)
	if err != nil {
		http.Error(w, err.Error(), status)
		return
	}
	ctx, cancel := scrapeContext(r, e.timeout)
	defer cancel()
	snap := e.poller.Poll(ctx)
	// Gathered after the poll, so the counters include its requests.
	reg := prometheus.NewRegistry()
	reg.MustRegister(e.metrics.collector(snap), e.requests, e.info)
	if q.Get("debug") == "true" {
		h.writeDebug(w, target, module, m.Settings, snap, reg)
		return
	}
	serveGatherer(w, r, reg, h.logger)
}

// writeDebug answers /probe?debug=true, as blackbox_exporter's debug
// output does: the module's settings, the poll with each request and its
// phases, the answer that started a hold-off in force, and the metrics
// the probe would have returned.
func (h *ProbeHandler) writeDebug(w http.ResponseWriter, target *url.URL, module string, s TargetSettings, snap *Snapshot, reg prometheus.Gatherer) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	var b strings.Builder
	_ = WriteSettingsText(&b, moduleName(module), s)
	b.WriteByte('\n')
	rec := newPollRecord(client.RedactURL(target), moduleName(module), snap)
	if h.recent != nil {
		rec.HoldOffPollID = h.recent.HoldOffPoll(rec)
	}
	_ = rec.WriteText(&b)
	if len(rec.Requests) == 0 && !rec.HeldOff {
		b.WriteString("(answered from the last poll, inside the module's min_interval: its requests are on its page among the recent polls)\n")
	}
	if rec.HoldOffPollID != 0 {
		if met, ok := h.recent.Get(rec.HoldOffPollID); ok {
			fmt.Fprintf(&b, "\nThe answer that started the hold-off (poll %d, /polls/%d):\n", met.ID, met.ID)
			for _, q := range met.Requests {
				if !q.HoldOffUntil.IsZero() {
					fmt.Fprintf(&b, "%s %s %s -> status %d\n", q.Endpoint, q.Method, q.URL, q.Status)
					writeAnswerText(&b, q)
				}
			}
		}
	}
	b.WriteString("\nMetrics this probe would have returned:\n\n")
	mfs, err := reg.Gather()
	if err != nil {
		fmt.Fprintf(&b, "(cannot gather them: %v)\n", err)
	}
	for _, mf := range mfs {
		_, _ = expfmt.MetricFamilyToText(&b, mf)
	}
	_, _ = io.WriteString(w, b.String())
}

// parseTarget checks a /probe target (see client.ParseTarget) and returns
// it in one spelling, so that spellings of one service share one poller.
// Its errors never repeat the target, which could carry credentials.
func parseTarget(raw string) (*url.URL, error) {
	if raw == "" {
		return nil, fmt.Errorf("target parameter is missing: give the service's base URL, such as target=https://deploy.example.com")
	}
	u, err := client.ParseTarget(raw)
	if errors.Is(err, client.ErrURLCredentials) {
		return nil, fmt.Errorf("target: %w: the key comes from the module's authorization", err)
	}
	if err != nil {
		return nil, fmt.Errorf("target: %w", err)
	}
	return u, nil
}

func moduleName(m string) string {
	if m == "" {
		return "default"
	}
	return m
}

// pair looks the module up and returns its pair with target, or the
// status and reason of a refusal. Both happen under h.mu, so that a
// reload's Prune cannot come between them: a pair of the old module is
// pruned, never built after it.
func (h *ProbeHandler) pair(target *url.URL, module string) (*probeEntry, ProbeModule, int, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	m, err := h.lookup(module)
	if err != nil {
		return nil, m, http.StatusBadRequest, err
	}
	if m.CheckTarget != nil {
		if err := m.CheckTarget(target); err != nil {
			h.logger.Debug("Target refused", "target", client.RedactURL(target), "module", moduleName(module), "err", err)
			return nil, m, http.StatusForbidden, fmt.Errorf("module %q may not be used with target %s: %w", moduleName(module), client.RedactURL(target), err)
		}
	}
	e, err := h.entry(target, module, m)
	return e, m, http.StatusBadRequest, err
}

// entry returns the poller for target and module m, building one when
// there is none or the module changed since; h.mu is held.
func (h *ProbeHandler) entry(target *url.URL, module string, m ProbeModule) (*probeEntry, error) {
	settings, version := m.Settings, m.Version
	key := probeKey{target: target.String(), module: moduleName(module)}
	if e, ok := h.pollers[key]; ok && reflect.DeepEqual(e.version, version) {
		e.lastUsed = time.Now()
		return e, nil
	} else if ok {
		h.keepBook(key, e.poller)
		e.poller.stop()
		h.drop(key, e)
	}
	shared, err := h.module(key.module, settings, version)
	if err != nil {
		return nil, h.targetError(key.module, err)
	}
	name := client.RedactURL(target)
	e := &probeEntry{
		version: version, metrics: shared.metrics, requests: newRequestMetrics(), info: NewTargetInfo(name, h.debugPage(target, key.module)),
		timeout: settings.Timeout, lastUsed: time.Now(),
	}
	settings.Client.Transport, settings.Client.Observer, settings.Client.HoldOffs = shared.transport, e.requests, h.HoldOffs
	e.poller, err = NewTargetPoller(target, settings, PollerOptions{
		Logger: h.logger.With("target", name, "module", key.module), Recent: h.recent, Name: name, Module: key.module,
		Polls: e.requests, TimeoutName: fmt.Sprintf("the timeout of module %q", key.module),
	})
	if err != nil {
		return nil, h.targetError(key.module, err)
	}
	if old, ok := h.books[key]; ok {
		e.poller.takeLocations(old)
		delete(h.books, key)
	}
	// Only now that the new pair is known to work does an old one make
	// room for it.
	if len(h.pollers) >= h.maxTargets {
		h.evictOldest()
	}
	h.pollers[key] = e
	return e, nil
}

// keepBook keeps the location checks of a pair being replaced, for its
// next poller; h.mu is held. The stash is bounded like the cache: a pair
// never probed again gives up its place.
func (h *ProbeHandler) keepBook(key probeKey, p *Poller) {
	if _, ok := h.books[key]; !ok && len(h.books) >= h.maxTargets {
		for k := range h.books {
			delete(h.books, k)
			break
		}
	}
	h.books[key] = p.keptLocations()
}

// debugPage is the address of the debug view of target with module under
// ExternalURL, "" without one.
func (h *ProbeHandler) debugPage(target *url.URL, module string) string {
	if h.ExternalURL == nil {
		return ""
	}
	q := url.Values{"target": {client.RedactURL(target)}, "module": {module}, "debug": {"true"}}
	return PageURL(h.ExternalURL, "probe") + "?" + q.Encode()
}

// PageURL is the address of the exporter's page at rel (relative, no
// leading slash) under its external URL.
func PageURL(external *url.URL, rel string) string {
	u := *external
	u.Path = strings.TrimSuffix(u.Path, "/") + "/" + rel
	u.RawPath, u.RawQuery, u.Fragment = "", "", ""
	return u.String()
}

func (h *ProbeHandler) targetError(module string, err error) error {
	return fmt.Errorf("module %q cannot poll this target: %s", module, strings.ReplaceAll(err.Error(), "\n", " "))
}

// module returns what the targets of the named module share, built anew
// when the module changed; h.mu is held. The targets of the old version
// keep theirs until they are dropped.
func (h *ProbeHandler) module(name string, s TargetSettings, version any) (*probeModule, error) {
	if m, ok := h.modules[name]; ok && reflect.DeepEqual(m.version, version) {
		return m, nil
	}
	t, err := client.NewTransport(s.Client.HTTPClientConfig, s.Client.UserAgent)
	if err != nil {
		return nil, err
	}
	m := &probeModule{version: version, transport: t, metrics: NewMetrics(s.InfoFields)}
	h.modules[name] = m
	return m, nil
}

// Prune drops the pollers whose module is gone or changed, as a reload
// leaves them: their polls in flight are cancelled, so that nothing more
// is sent with the old module, and their connections close. Their request
// counters restart if the pair is probed again.
func (h *ProbeHandler) Prune() {
	h.mu.Lock()
	defer h.mu.Unlock()
	for key, e := range h.pollers {
		m, err := h.lookup(key.module)
		if err != nil || !reflect.DeepEqual(e.version, m.Version) {
			if err == nil {
				h.keepBook(key, e.poller)
			}
			e.poller.stop()
			h.drop(key, e)
		}
	}
	for key := range h.books {
		if _, err := h.lookup(key.module); err != nil {
			delete(h.books, key)
		}
	}
	for name, m := range h.modules {
		if l, err := h.lookup(name); err != nil || !reflect.DeepEqual(m.version, l.Version) {
			delete(h.modules, name)
		}
	}
}

// drop forgets a pair and closes its client's connections: at once, or
// as soon as a poll still in flight ends; h.mu is held.
func (h *ProbeHandler) drop(key probeKey, e *probeEntry) {
	e.poller.target.Client.Close()
	delete(h.pollers, key)
}

func (h *ProbeHandler) evictOldest() {
	var oldest probeKey
	var at time.Time
	for k, e := range h.pollers {
		if at.IsZero() || e.lastUsed.Before(at) {
			oldest, at = k, e.lastUsed
		}
	}
	if e, ok := h.pollers[oldest]; ok {
		h.drop(oldest, e)
	}
}
