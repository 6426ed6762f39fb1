package collector

import (
	"context"
	"fmt"
	"log/slog"
	"math"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	// zstd lets promhttp answer "Accept-Encoding: zstd", which Prometheus
	// 3 sends with --enable-feature=zstd-scrape; it links
	// github.com/klauspost/compress, a pure-Go library without further
	// dependencies (about 350 KB of binary).
	_ "github.com/prometheus/client_golang/prometheus/promhttp/zstd"
)

// scrapeTimeoutHeader is where Prometheus tells how long it will wait.
const scrapeTimeoutHeader = "X-Prometheus-Scrape-Timeout-Seconds"

// Handler serves one scrape: it polls through its Poller within the
// scrape's budget and serves the snapshot on a registry of its own, next to
// the long-lived gatherer (nil for /probe, which serves only the poll).
type Handler struct {
	poller   *Poller
	metrics  *Metrics
	gatherer prometheus.Gatherer
	timeout  time.Duration
	logger   *slog.Logger
}

// NewHandler returns a handler for p. timeout is --api.timeout, the upper
// bound of a poll whatever Prometheus allows.
func NewHandler(p *Poller, m *Metrics, longLived prometheus.Gatherer, timeout time.Duration, logger *slog.Logger) *Handler {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	return &Handler{poller: p, metrics: m, gatherer: longLived, timeout: timeout, logger: logger}
}

// ServeHTTP implements http.Handler.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := scrapeContext(r, h.timeout)
	defer cancel()
	// Gatherers sorts the families it merges and checks them, as a
	// registry would.
	g := prometheus.Gatherers{h.metrics.gatherer(h.poller.Poll(ctx))}
	if h.gatherer != nil {
		g = append(g, h.gatherer)
	}
	serveGatherer(w, r, g, h.logger)
}

// NewGathererHandler serves g as every scrape endpoint of the exporter
// does: in the format and encoding the scraper asks for.
func NewGathererHandler(g prometheus.Gatherer, logger *slog.Logger) http.Handler {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		serveGatherer(w, r, g, logger)
	})
}

// serveGatherer writes g's metrics, unless Prometheus has already hung up.
// The format follows the Accept header: OpenMetrics for Prometheus 2.5 and
// later (3.x asks for it first), protobuf when native histograms are
// scraped, the classic text format otherwise (curl, promtool). The body is
// compressed with zstd or gzip when Accept-Encoding asks for it.
func serveGatherer(w http.ResponseWriter, r *http.Request, g prometheus.Gatherer, logger *slog.Logger) {
	if r.Context().Err() != nil {
		logger.Debug("Scrape abandoned before the answer was ready")
		return
	}
	promhttp.HandlerFor(g, promhttp.HandlerOpts{
		ErrorLog:          scrapeErrorLog{ctx: r.Context(), logger: logger},
		ErrorHandling:     promhttp.ContinueOnError,
		EnableOpenMetrics: true,
		// Counters and histograms carry when they began; OpenMetrics
		// shows it as _created, so a reset is known for one.
		EnableOpenMetricsTextCreatedSamples: true,
		// zstd first: Prometheus asks for "zstd,gzip" when its zstd-scrape
		// feature is on, and promhttp breaks ties by this order.
		OfferedCompressions: offeredCompressions,
	}).ServeHTTP(w, r)
}

// offeredCompressions are the encodings served, by preference.
var offeredCompressions = []promhttp.Compression{promhttp.Zstd, promhttp.Gzip, promhttp.Identity}

// scrapeErrorLog passes promhttp's errors to the log, at debug level once
// Prometheus has hung up: writes to a closed connection are expected then
// and would otherwise fill the log with an error per metric family.
type scrapeErrorLog struct {
	ctx    context.Context
	logger *slog.Logger
}

func (l scrapeErrorLog) Println(v ...any) {
	msg := strings.TrimSpace(fmt.Sprintln(v...))
	if l.ctx.Err() != nil {
		l.logger.Debug("Scrape abandoned while the answer was written", "err", msg)
		return
	}
	l.logger.Error("Cannot serve metrics", "err", msg)
}

// scrapeContext is the context of a poll for request r: its deadline is
// scrapeBudget's, and it remembers the scrape timeout that set it.
func scrapeContext(r *http.Request, limit time.Duration) (context.Context, context.CancelFunc) {
	ctx := r.Context()
	if v := r.Header.Get(scrapeTimeoutHeader); v != "" {
		ctx = WithScrapeTimeout(ctx, v)
	}
	return context.WithTimeout(ctx, scrapeBudget(r, limit))
}

// scrapeBudget is the time a poll may take for request r: the scrape
// timeout Prometheus sends, less a margin to encode the answer, and never
// more than limit.
func scrapeBudget(r *http.Request, limit time.Duration) time.Duration {
	v := r.Header.Get(scrapeTimeoutHeader)
	if v == "" {
		return limit
	}
	secs, err := strconv.ParseFloat(v, 64)
	if err != nil || math.IsNaN(secs) || secs <= 0 || secs > 1e6 {
		return limit
	}
	t := time.Duration(secs * float64(time.Second))
	// A tenth of the timeout, between 50ms and 500ms, is room enough to
	// encode the answer and cross the network back.
	margin := min(max(t/10, 50*time.Millisecond), 500*time.Millisecond)
	budget := t - margin
	if budget < t/2 {
		budget = t / 2
	}
	return min(budget, limit)
}
