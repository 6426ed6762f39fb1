package collector

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"reflect"
	"strconv"
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

	mu      sync.Mutex
	pollers map[probeKey]*probeEntry
	modules map[string]*probeModule
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
		lookup: lookup, recent: recent, logger: logger, maxTargets: maxProbeTargets,
		pollers: make(map[probeKey]*probeEntry), modules: make(map[string]*probeModule),
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
	e, err := h.entry(target, module)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), scrapeBudget(r, e.timeout))
	defer cancel()
	snap := e.poller.Poll(ctx)
	if q.Get("debug") == "true" {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		_ = newPollRecord(client.RedactURL(target), moduleName(module), snap).WriteText(w)
		return
	}
	// Gathered after the poll, so the counters include its requests.
	reg := prometheus.NewRegistry()
	reg.MustRegister(e.metrics.collector(snap), e.requests, e.info)
	serveGatherer(w, r, reg, h.logger)
}

// parseTarget checks a /probe target: an absolute http or https base URL
// without credentials, query or fragment. It returns the target in one
// spelling (see normalizeTarget), so that spellings of one service share
// one poller. Its errors never repeat the target, which could carry
// credentials.
func parseTarget(raw string) (*url.URL, error) {
	if raw == "" {
		return nil, fmt.Errorf("target parameter is missing: give the service's base URL, such as target=https://deploy.example.com")
	}
	u, err := client.ParseBaseURL(raw)
	if errors.Is(err, client.ErrURLCredentials) {
		return nil, fmt.Errorf("target: %w: the key comes from the module's authorization", err)
	}
	if err != nil {
		return nil, fmt.Errorf("target: %w", err)
	}
	return normalizeTarget(u), nil
}

// defaultPorts are the ports a scheme implies.
var defaultPorts = map[string]string{"http": "80", "https": "443"}

// normalizeTarget spells a checked base URL one way: scheme and host in
// lower case, the scheme's default port dropped, the port without leading
// zeros, and no trailing slash on the path (the client puts "/api/" after
// the path whether or not it ends with one). IPv6 hosts keep their
// brackets, and a zone keeps its case.
func normalizeTarget(u *url.URL) *url.URL {
	n := *u
	n.Scheme = strings.ToLower(u.Scheme)
	host := u.Hostname()
	if addr, zone, ok := strings.Cut(host, "%"); ok {
		host = strings.ToLower(addr) + "%" + zone
	} else {
		host = strings.ToLower(host)
	}
	if strings.Contains(host, ":") {
		host = "[" + host + "]"
	}
	if port := strings.TrimLeft(u.Port(), "0"); port != "" && port != defaultPorts[n.Scheme] {
		host += ":" + port
	}
	n.Host = host
	n.Path = strings.TrimRight(u.Path, "/")
	n.RawPath = ""
	if u.RawPath != "" {
		// Escapes that change the meaning, such as %2F, stay; those of
		// characters that need none go, as RFC 3986 section 6.2.2 has it.
		if raw := normalizeEscapes(strings.TrimRight(u.RawPath, "/")); raw != n.EscapedPath() {
			n.RawPath = raw
		}
	}
	return &n
}

// normalizeEscapes decodes the percent-escapes of unreserved characters
// in an escaped path and writes the others in upper case.
func normalizeEscapes(p string) string {
	var b strings.Builder
	for i := 0; i < len(p); i++ {
		if p[i] != '%' || i+2 >= len(p) {
			b.WriteByte(p[i])
			continue
		}
		v, err := strconv.ParseUint(p[i+1:i+3], 16, 8)
		if err != nil {
			b.WriteByte(p[i])
			continue
		}
		if c := byte(v); isUnreserved(c) {
			b.WriteByte(c)
		} else {
			b.WriteString(strings.ToUpper(p[i : i+3]))
		}
		i += 2
	}
	return b.String()
}

// isUnreserved tells whether c is an unreserved character of RFC 3986.
func isUnreserved(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || strings.IndexByte("-._~", c) >= 0
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
		h.drop(key, e)
	}
	if len(h.pollers) >= h.maxTargets {
		h.evictOldest()
	}
	m, err := h.module(key.module, settings, version)
	if err != nil {
		return nil, h.targetError(key.module, err)
	}
	name := client.RedactURL(target)
	e := &probeEntry{
		version: version, metrics: m.metrics, requests: newRequestMetrics(), info: NewTargetInfo(name),
		timeout: settings.Timeout, lastUsed: time.Now(),
	}
	settings.Client.Transport, settings.Client.Observer = m.transport, e.requests
	e.poller, err = NewTargetPoller(target, settings, PollerOptions{
		Logger: h.logger.With("target", name, "module", key.module), Recent: h.recent, Name: name, Module: key.module,
	})
	if err != nil {
		return nil, h.targetError(key.module, err)
	}
	h.pollers[key] = e
	return e, nil
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
// leaves them, and closes their connections; their request counters
// restart if the pair is probed again. Without it they would go only when
// probed again or evicted, keeping their connections until then.
func (h *ProbeHandler) Prune() {
	h.mu.Lock()
	defer h.mu.Unlock()
	for key, e := range h.pollers {
		if _, version, err := h.lookup(key.module); err != nil || !reflect.DeepEqual(e.version, version) {
			h.drop(key, e)
		}
	}
	for name, m := range h.modules {
		if _, version, err := h.lookup(name); err != nil || !reflect.DeepEqual(m.version, version) {
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
