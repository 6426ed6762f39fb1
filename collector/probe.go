package collector

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"reflect"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/deployment-service/deployment_service_exporter/client"
)

// maxProbeTargets bounds the pollers kept for /probe, since targets come
// from requests; the least recently used one goes first.
const maxProbeTargets = 1000

// ModuleLookup finds a module by name. It returns the module's settings
// and a value describing the module (compared with reflect.DeepEqual), so
// that a reload replaces the pollers of changed modules only: the others
// keep their hold-off, minimum interval and last poll.
type ModuleLookup func(name string) (s TargetSettings, version any, err error)

// ProbeHandler serves /probe?target=<base URL>&module=<name>: a poll of any
// service, with the per-scrape metrics only, on a registry of its own. It
// keeps one poller per target and module, so min interval, hold-off and
// shared polls apply to each of them as they do to /metrics.
type ProbeHandler struct {
	lookup ModuleLookup
	recent *PollLog
	logger *slog.Logger

	mu      sync.Mutex
	pollers map[probeKey]*probeEntry
}

type probeKey struct{ target, module string }

type probeEntry struct {
	version  any
	poller   *Poller
	metrics  *Metrics
	timeout  time.Duration
	lastUsed time.Time
}

// NewProbeHandler returns a /probe handler; recent may be nil.
func NewProbeHandler(lookup ModuleLookup, recent *PollLog, logger *slog.Logger) *ProbeHandler {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	return &ProbeHandler{lookup: lookup, recent: recent, logger: logger, pollers: make(map[probeKey]*probeEntry)}
}

// ServeHTTP implements http.Handler.
func (h *ProbeHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	target, err := ParseTarget(q.Get("target"))
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	module := q.Get("module")
	e, err := h.entry(target, module)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), ScrapeBudget(r, e.timeout))
	defer cancel()
	snap := e.poller.Poll(ctx)
	if q.Get("debug") == "true" {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		_ = newPollRecord(client.RedactURL(target), moduleName(module), snap).WriteText(w)
		return
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(e.metrics.Collector(snap))
	serveGatherer(w, r, reg, h.logger)
}

// ParseTarget checks a /probe target: an absolute http or https base URL
// without credentials, query or fragment. Its errors never repeat the
// target, which could carry credentials.
func ParseTarget(raw string) (*url.URL, error) {
	if raw == "" {
		return nil, fmt.Errorf("target parameter is missing: give the service's base URL, such as target=https://deploy.example.com")
	}
	u, err := client.ParseBaseURL(raw)
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

// entry returns the poller for target and module, building one when there
// is none or the module changed since.
func (h *ProbeHandler) entry(target *url.URL, module string) (*probeEntry, error) {
	settings, version, err := h.lookup(module)
	if err != nil {
		return nil, err
	}
	key := probeKey{target: target.String(), module: moduleName(module)}
	h.mu.Lock()
	defer h.mu.Unlock()
	if e, ok := h.pollers[key]; ok && reflect.DeepEqual(e.version, version) {
		e.lastUsed = time.Now()
		return e, nil
	} else if ok {
		e.poller.Target().Client.Close()
		delete(h.pollers, key)
	}
	// Close drops idle connections only; one still in use by a poll goes
	// back to the pool and is closed by its idle timeout.
	if len(h.pollers) >= maxProbeTargets {
		h.evictOldest()
	}
	logger := h.logger.With("target", client.RedactURL(target), "module", key.module)
	p, err := NewTargetPoller(target, settings, PollerOptions{
		Logger: logger, Recent: h.recent, Name: client.RedactURL(target), Module: key.module,
	})
	if err != nil {
		return nil, fmt.Errorf("module %q cannot poll this target: %s", key.module, strings.ReplaceAll(err.Error(), "\n", " "))
	}
	e := &probeEntry{version: version, poller: p, metrics: NewMetrics(settings.InfoFields), timeout: settings.Timeout, lastUsed: time.Now()}
	h.pollers[key] = e
	return e, nil
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
		e.poller.Target().Client.Close()
		delete(h.pollers, oldest)
	}
}
