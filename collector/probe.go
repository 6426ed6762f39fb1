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

// maxProbeTargets bounds the pollers kept for /probe; the least recently used goes first.
const maxProbeTargets = 1000

// ModuleLookup finds a module by name; its error is the 400's reason.
type ModuleLookup func(name string) (ProbeModule, error)

// ProbeModule is what /probe needs of a module.
type ProbeModule struct {
	Settings TargetSettings
	// Version is compared on reload: only pollers of changed modules are replaced.
	Version any
	// CheckTarget says why the module may not be used with a target; nil allows any.
	CheckTarget func(target *url.URL) error
}

// ProbeHandler serves /probe?target=<base URL>&module=<name> from one poller
// per target and module, each with its own interval, hold-off and request metrics.
type ProbeHandler struct {
	lookup     ModuleLookup
	recent     *PollLog
	logger     *slog.Logger
	maxTargets int
	// ExternalURL, when set, is where target_info links point; set it before serving.
	ExternalURL *url.URL
	// HoldOffs keeps every origin's hold-off, so a pair dropped from the cache forgets none.
	HoldOffs *client.HoldOffs

	mu      sync.Mutex
	pollers map[probeKey]*probeEntry
	modules map[string]*probeModule
	// books keeps the location checks of pairs a reload replaced, until rebuilt.
	books map[probeKey]*locationBook
}

type probeKey struct{ target, module string }

// probeModule is what one module's targets share: transport, key source and descriptors.
type probeModule struct {
	version   any
	transport *client.Transport
	metrics   *Metrics
}

// probeEntry is one target × module pair: its poller and its lasting metrics.
type probeEntry struct {
	version  any
	poller   *Poller
	metrics  *Metrics
	requests *RequestMetrics
	info     prometheus.Collector
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
		books: make(map[probeKey]*locationBook),
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
	reg := prometheus.NewRegistry()
	reg.MustRegister(e.requests, e.info)
	g := prometheus.Gatherers{e.metrics.gatherer(snap), reg}
	if q.Get("debug") == "true" {
		h.writeDebug(w, target, module, m.Settings, snap, g)
		return
	}
	serveGatherer(w, r, g, h.logger)
}

// writeDebug answers /probe?debug=true, as blackbox_exporter's debug output does.
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

// parseTarget checks a /probe target and returns it in one spelling, so that
// spellings of one service share one poller; its errors never repeat the target.
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

// pair looks the module up and returns its pair with target, or a refusal, under
// h.mu so that a reload's Prune cannot come between.
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

// entry returns the poller for target and m, building one when needed; h.mu is held.
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
		version: version, metrics: shared.metrics, requests: newRequestMetrics(), info: NewTargetInfo(name, TargetPage(h.ExternalURL, name, key.module)),
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
	if len(h.pollers) >= h.maxTargets {
		h.evictOldest()
	}
	h.pollers[key] = e
	return e, nil
}

// keepBook stashes a replaced pair's location checks, bounded like the cache; h.mu is held.
func (h *ProbeHandler) keepBook(key probeKey, p *Poller) {
	if _, ok := h.books[key]; !ok && len(h.books) >= h.maxTargets {
		for k := range h.books {
			delete(h.books, k)
			break
		}
	}
	h.books[key] = p.keptLocations()
}

func (h *ProbeHandler) targetError(module string, err error) error {
	return fmt.Errorf("module %q cannot poll this target: %s", module, strings.ReplaceAll(err.Error(), "\n", " "))
}

// module returns what the named module's targets share, rebuilt when it changed; h.mu is held.
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

// Prune drops the pollers whose module is gone or changed after a reload,
// cancelling their polls and closing their connections.
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

// drop forgets a pair and closes its connections once no poll is in flight; h.mu is held.
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
