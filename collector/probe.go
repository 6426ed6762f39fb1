package collector

import (
	"cmp"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net/http"
	"net/url"
	"reflect"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/common/expfmt"

	"github.com/deployment-service/deployment_service_exporter/client"
)

// maxProbeTargets bounds the pairs /probe keeps; the least recently used goes first.
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

// ProbeHandler serves /probe?target=<base URL>&module=<name> from one poller per target and module.
type ProbeHandler struct {
	lookup ModuleLookup
	recent *PollLog
	logger *slog.Logger
	// ExternalURL, when set, is where target_info links point; set it before serving.
	ExternalURL *url.URL
	// HoldOffs keeps every origin's hold-off, so a pair dropped from the cache forgets none.
	HoldOffs *client.HoldOffs

	mu      sync.Mutex
	pollers map[targetKey]*probeEntry
	modules map[string]*probeModule
}

// probeModule is what one module's targets share.
type probeModule struct {
	version   any
	transport *client.Transport
	metrics   *Metrics
}

// probeEntry is one target and module pair; a stale one, stopped by a reload, keeps its location checks for its successor.
type probeEntry struct {
	module   *probeModule
	poller   *Poller
	requests *RequestMetrics
	reg      *prometheus.Registry // requests and target_info
	lastUsed time.Time
	stale    bool
}

// NewProbeHandler returns a /probe handler; recent may be nil.
func NewProbeHandler(lookup ModuleLookup, recent *PollLog, logger *slog.Logger) *ProbeHandler {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	return &ProbeHandler{
		lookup: lookup, recent: recent, logger: logger, HoldOffs: client.NewHoldOffs(),
		pollers: make(map[targetKey]*probeEntry), modules: make(map[string]*probeModule),
	}
}

// ServeHTTP implements http.Handler.
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
	g := prometheus.Gatherers{e.module.metrics.gatherer(snap), e.reg}
	if q.Get("debug") == "true" {
		h.writeDebug(w, e.poller.opts, m.Settings, snap, g)
		return
	}
	serveGatherer(w, r, g, h.logger)
}

// writeDebug answers /probe?debug=true, as blackbox_exporter's debug output does.
func (h *ProbeHandler) writeDebug(w http.ResponseWriter, o PollerOptions, s TargetSettings, sn *Snapshot, g prometheus.Gatherer) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	_ = WriteSettingsText(w, o.Module, s)
	fmt.Fprintln(w)
	_ = h.recent.recordOf(o.Name, o.Module, sn).WriteText(w)
	fmt.Fprint(w, "\nMetrics this probe would have returned:\n\n")
	mfs, err := g.Gather()
	if err != nil {
		fmt.Fprintf(w, "(cannot gather them: %v)\n", err)
	}
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
	if ok && !old.stale && reflect.DeepEqual(old.module.version, m.Version) {
		old.lastUsed = time.Now()
		return old, m, 0, nil
	} else if ok {
		old.retire()
	}
	e, err := h.newEntry(target, name, key.module, m)
	if err != nil {
		err = fmt.Errorf("module %q cannot poll this target: %s", key.module, strings.ReplaceAll(err.Error(), "\n", " "))
		return nil, m, http.StatusBadRequest, err
	}
	if ok {
		e.poller.takeLocations(old.poller.keptLocations())
	} else if len(h.pollers) >= maxProbeTargets {
		oldest := slices.MinFunc(slices.Collect(maps.Keys(h.pollers)), func(a, b targetKey) int {
			return h.pollers[a].lastUsed.Compare(h.pollers[b].lastUsed)
		})
		h.pollers[oldest].poller.target.Client.Close()
		delete(h.pollers, oldest)
	}
	h.pollers[key] = e
	return e, m, 0, nil
}

// newEntry builds the pair of target, named so once redacted, and module m.
func (h *ProbeHandler) newEntry(target *url.URL, name, module string, m ProbeModule) (*probeEntry, error) {
	shared, ok := h.modules[module]
	if !ok || !reflect.DeepEqual(shared.version, m.Version) {
		t, err := client.NewTransport(m.Settings.Client.HTTPClientConfig, m.Settings.Client.UserAgent)
		if err != nil {
			return nil, err
		}
		shared = &probeModule{version: m.Version, transport: t, metrics: NewMetrics(m.Settings.InfoFields)}
		h.modules[module] = shared
	}
	e := &probeEntry{module: shared, requests: newRequestMetrics(), lastUsed: time.Now()}
	e.reg = prometheus.NewRegistry()
	e.reg.MustRegister(e.requests, NewTargetInfo(name, TargetPage(h.ExternalURL, name, module)))
	s := m.Settings
	s.Client.Transport, s.Client.Observer, s.Client.HoldOffs = shared.transport, e.requests, h.HoldOffs
	var err error
	e.poller, err = NewTargetPoller(target, s, PollerOptions{
		Logger: h.logger.With("target", logName(name), "module", module), Recent: h.recent, Name: name, Module: module,
		Polls: e.requests, TimeoutName: fmt.Sprintf("the timeout of module %q", module),
	})
	return e, err
}

// Prune stops, after a reload, the pollers whose module changed and drops those whose module is gone.
func (h *ProbeHandler) Prune() {
	h.mu.Lock()
	defer h.mu.Unlock()
	for key, e := range h.pollers {
		if m, err := h.lookup(key.module); err != nil || !reflect.DeepEqual(e.module.version, m.Version) {
			e.retire()
			if err != nil {
				delete(h.pollers, key)
			}
		}
	}
	for name, m := range h.modules {
		if l, err := h.lookup(name); err != nil || !reflect.DeepEqual(m.version, l.Version) {
			delete(h.modules, name)
		}
	}
}

// retire stops e's poll and closes its connections once no request is in flight.
func (e *probeEntry) retire() {
	e.stale = true
	e.poller.stop()
	e.poller.target.Client.Close()
}
