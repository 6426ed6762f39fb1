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
	"github.com/prometheus/common/config"
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
	http      config.HTTPClientConfig
}

// probeEntry is one target and module pair; its counters live while the cache keeps the pair.
type probeEntry struct {
	target   *url.URL
	module   *probeModule
	poller   *Poller
	polls    pollCounts
	reg      *prometheus.Registry // the poll counters and target_info
	lastUsed time.Time
	stale    bool // replaced at its next use: a reload changed its module
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
	rec := newPollRecord(o.Name, o.Module, sn)
	var met *PollRecord
	if h.recent != nil {
		if met = h.recent.holdOffPoll(rec); met != nil {
			rec.HoldOffPollID = met.ID
		}
	}
	_ = textView.ExecuteTemplate(w, "probe", map[string]any{"Poll": rec, "Met": met})
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
		old.retire(!sameCredentials(old.module.http, m.Settings.Client.HTTPClientConfig))
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
		h.pollers[oldest].poller.target.Client.Close()
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
		e.reg, e.polls = old.reg, old.polls
	} else {
		e.reg = prometheus.NewRegistry()
		e.polls = newPollCounts(e.reg)
		e.reg.MustRegister(NewTargetInfo(name, TargetPage(h.ExternalURL, name, module)))
	}
	s := m.Settings
	s.Client.Transport, s.Client.HoldOffs = shared.transport, h.HoldOffs
	var err error
	e.poller, err = NewTargetPoller(target, s, PollerOptions{
		Logger: h.logger.With("target", name, "module", module), Recent: h.recent, Name: name, Module: module,
		Polls: e.polls, TimeoutName: fmt.Sprintf("the timeout of module %q", module),
	})
	if err == nil && old != nil {
		e.poller.takeLocations(old.poller.keptLocations())
	}
	return e, err
}

// Prune applies a reload: it cancels and drops the pairs the reload no longer allows,
// and marks those whose module changed otherwise for replacement, leaving their polls in flight alone.
func (h *ProbeHandler) Prune() {
	h.mu.Lock()
	defer h.mu.Unlock()
	for key, e := range h.pollers {
		m, err := h.lookup(key.module)
		revoked := err != nil || m.CheckTarget != nil && m.CheckTarget(e.target) != nil ||
			!sameCredentials(e.module.http, m.Settings.Client.HTTPClientConfig)
		if revoked {
			e.retire(true)
			delete(h.pollers, key)
		} else if !reflect.DeepEqual(e.module.version, m.Version) {
			e.retire(false)
		}
	}
	for name, m := range h.modules {
		if l, err := h.lookup(name); err != nil || !reflect.DeepEqual(m.version, l.Version) {
			delete(h.modules, name)
		}
	}
}

// retire marks e for replacement and closes its idle connections; revoke cancels its poll in flight too.
func (e *probeEntry) retire(revoke bool) {
	e.stale = true
	if revoke {
		e.poller.stop()
	}
	e.poller.target.Client.Close()
}

// sameCredentials tells whether a and b lend the same authority (CONTRACT.md, "Credentials").
func sameCredentials(a, b config.HTTPClientConfig) bool {
	creds := func(c config.HTTPClientConfig) []any {
		t := c.TLSConfig
		return []any{c.Authorization, c.BasicAuth, c.OAuth2, c.BearerToken, c.BearerTokenFile, c.HTTPHeaders,
			t.Cert, t.CertFile, t.Key, t.KeyFile, c.ProxyURL, c.NoProxy, c.ProxyFromEnvironment, c.ProxyConnectHeader}
	}
	return reflect.DeepEqual(creds(a), creds(b))
}
