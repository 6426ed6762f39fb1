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
	// zstd answers Prometheus 3's zstd-scrape feature.
	_ "github.com/prometheus/client_golang/prometheus/promhttp/zstd"
)

const scrapeTimeoutHeader = "X-Prometheus-Scrape-Timeout-Seconds"

// NewHandler serves /metrics: a poll of p within the scrape's budget, beside
// the long-lived gatherer; timeout is --api.timeout.
func NewHandler(p *Poller, m *Metrics, longLived prometheus.Gatherer, timeout time.Duration, logger *slog.Logger) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := scrapeContext(r, timeout)
		defer cancel()
		g := prometheus.Gatherers{m.gatherer(p.Poll(ctx))}
		if longLived != nil {
			g = append(g, longLived)
		}
		serveGatherer(w, r, g, logger)
	})
}

// NewGathererHandler serves g in the format and encoding the scraper asks for.
func NewGathererHandler(g prometheus.Gatherer, logger *slog.Logger) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		serveGatherer(w, r, g, logger)
	})
}

// serveGatherer writes g's metrics, unless Prometheus has already hung up.
func serveGatherer(w http.ResponseWriter, r *http.Request, g prometheus.Gatherer, logger *slog.Logger) {
	if r.Context().Err() != nil {
		logger.Debug("Scrape abandoned before the answer was ready")
		return
	}
	promhttp.HandlerFor(g, promhttp.HandlerOpts{
		ErrorLog:          scrapeErrorLog{ctx: r.Context(), logger: logger},
		ErrorHandling:     promhttp.ContinueOnError,
		EnableOpenMetrics: true,
		// zstd first: promhttp breaks the tie in Prometheus's "zstd,gzip" by this order.
		OfferedCompressions: []promhttp.Compression{promhttp.Zstd, promhttp.Gzip, promhttp.Identity},
	}).ServeHTTP(w, r)
}

// scrapeErrorLog logs promhttp's errors, at debug level once Prometheus has hung up.
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

// scrapeContext is the context of a poll for r, with scrapeBudget's deadline.
func scrapeContext(r *http.Request, limit time.Duration) (context.Context, context.CancelFunc) {
	ctx := r.Context()
	if v := r.Header.Get(scrapeTimeoutHeader); v != "" {
		ctx = WithScrapeTimeout(ctx, v)
	}
	return context.WithTimeout(ctx, scrapeBudget(r, limit))
}

// scrapeBudget is the time a poll may take for r: the scrape timeout less a
// margin to encode and send the answer, at most limit.
func scrapeBudget(r *http.Request, limit time.Duration) time.Duration {
	secs, err := strconv.ParseFloat(r.Header.Get(scrapeTimeoutHeader), 64)
	if err != nil || math.IsNaN(secs) || secs <= 0 || secs > 1e6 {
		return limit
	}
	t := time.Duration(secs * float64(time.Second))
	margin := min(max(t/10, 50*time.Millisecond), 500*time.Millisecond)
	return min(max(t-margin, t/2), limit)
}
