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

// NewHandler serves /metrics: longLived and, unless p is nil, a poll of p within the scrape's budget and timeout.
func NewHandler(p *Poller, m *Metrics, t *TargetStats, longLived prometheus.Gatherer, timeout time.Duration, logger *slog.Logger) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var g prometheus.Gatherers
		if longLived != nil {
			g = append(g, longLived)
		}
		if p != nil {
			ctx, cancel := scrapeContext(r, timeout)
			defer cancel()
			g = append(g, m.gatherer(p.Poll(ctx), t))
		}
		serveGatherer(w, r, g, logger)
	})
}

// serveGatherer writes g's metrics; a scrape that Prometheus has given up is logged at debug level only.
func serveGatherer(w http.ResponseWriter, r *http.Request, g prometheus.Gatherer, logger *slog.Logger) {
	if r.Context().Err() != nil {
		logger.Debug("Scrape abandoned before the answer was ready")
		return
	}
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
