package collector

// Benchmarks of a scrape inside one process: exposition (issue 4 item 6),
// fan-out against a slow service (item 3), the size of the service (item 4)
// and shared polls (item 5). The sample service runs in the same process
// here, so ns/op of the scrape benchmarks includes the service's work; the
// bench command (go run ./bench) measures the exporter's CPU and memory on
// its own, with the service in another process. Each benchmark finishes in
// well under a second at -benchtime=1x, which CI runs as a smoke test.

import (
	"context"
	"log/slog"
	"math"
	"net/http"
	"net/http/httptest"
	"net/url"
	"runtime"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/prometheus/common/config"

	"github.com/deployment-service/deployment_service_exporter/client"
	"github.com/deployment-service/deployment_service_exporter/sampleservice"
)

// BenchmarkExposition gathers and encodes the per-scrape metrics of a
// snapshot with n locations in the detail subset, the way Handler does once
// the poll is done. It reports the time per location and the allocations
// per series, which must not grow with n.
func BenchmarkExposition(b *testing.B) {
	for _, n := range []int{10, 100, 1000} {
		b.Run("locations="+strconv.Itoa(n), func(b *testing.B) {
			m := NewMetrics([]string{"name", "region"})
			snap := benchSnapshot(n)
			series := benchSeries(b, m, snap)
			req := httptest.NewRequest(http.MethodGet, "/metrics", nil)
			w := &discardResponse{header: http.Header{}}

			b.ReportAllocs()
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			start := time.Now()
			ops := 0
			for b.Loop() {
				serveSnapshot(w, req, m, snap)
				ops++
			}
			elapsed := time.Since(start)
			runtime.ReadMemStats(&after)

			perOp := float64(elapsed.Nanoseconds()) / float64(ops)
			b.ReportMetric(perOp/float64(n), "ns/location")
			b.ReportMetric(float64(after.TotalAlloc-before.TotalAlloc)/float64(ops)/float64(series), "B/series")
			b.ReportMetric(float64(after.Mallocs-before.Mallocs)/float64(ops)/float64(series), "allocs/series")
			b.ReportMetric(float64(series), "series")
			b.ReportMetric(float64(w.n)/float64(ops), "body-bytes")
		})
	}
}

// serveSnapshot does what Handler.ServeHTTP does once the poll is done: the
// snapshot's families, served through promhttp.
func serveSnapshot(w http.ResponseWriter, r *http.Request, m *Metrics, s *Snapshot) {
	g := prometheus.Gatherers{m.gatherer(s, nil)}
	promhttp.HandlerFor(g, promhttp.HandlerOpts{ErrorHandling: promhttp.ContinueOnError}).ServeHTTP(w, r)
}

// benchSnapshot is a healthy poll with n locations in the detail subset,
// every tenth of them failed.
func benchSnapshot(n int) *Snapshot {
	s := &Snapshot{
		Start:     time.Now(),
		Duration:  120 * time.Millisecond,
		Endpoints: make(map[client.Endpoint]client.Result, 4),
		Projects:  Count{Value: 5, Known: true},
		Locations: Count{Value: int64(n) * 10, Known: true},
	}
	for _, ep := range client.Endpoints {
		s.Endpoints[ep] = client.Result{Status: http.StatusOK, Duration: 30 * time.Millisecond}
	}
	for i := range n {
		d := locationState{ID: int64(i + 1), DetailResult: client.DetailResult{Result: client.Result{Status: http.StatusOK, Duration: time.Duration(i%50+5) * time.Millisecond}}}
		if i%10 == 9 {
			d.Status, d.Err = http.StatusBadGateway, &client.Error{Endpoint: client.EndpointLocationDetail, Reason: client.ReasonHTTPStatus, Status: http.StatusBadGateway}
		} else {
			d.Fields = map[string]string{"name": "Noble Harbor " + strconv.Itoa(i+1), "region": "eu-west-1"}
		}
		s.Details = append(s.Details, d)
	}
	return s
}

// benchSeries counts the series a snapshot exposes.
func benchSeries(b *testing.B, m *Metrics, s *Snapshot) int {
	b.Helper()
	mfs, err := prometheus.Gatherers{m.gatherer(s, nil)}.Gather()
	if err != nil {
		b.Fatal(err)
	}
	n := 0
	for _, mf := range mfs {
		n += len(mf.GetMetric())
	}
	return n
}

// discardResponse is a ResponseWriter that counts and drops the body.
type discardResponse struct {
	header http.Header
	n      int64
}

func (d *discardResponse) Header() http.Header         { return d.header }
func (d *discardResponse) WriteHeader(int)             {}
func (d *discardResponse) Write(p []byte) (int, error) { d.n += int64(len(p)); return len(p), nil }

// benchPipeline is the exporter's pipeline (client, poller, handler)
// watching a sample service on loopback, for benchmarks.
type benchPipeline struct {
	svc     *sampleservice.Service
	poller  *Poller
	handler http.Handler
}

type benchOptions struct {
	service     sampleservice.Options
	concurrency int
	detailIDs   []int64
	detailLimit int
}

func newBenchPipeline(b *testing.B, o benchOptions) *benchPipeline {
	b.Helper()
	o.service.Key = "bench-key-7a1c"
	svc := sampleservice.New(o.service)
	srv := httptest.NewServer(svc)
	b.Cleanup(srv.Close)
	u, _ := url.Parse(srv.URL)
	reg := prometheus.NewRegistry()
	c, err := client.New(client.Config{
		BaseURL:          u,
		HTTPClientConfig: config.HTTPClientConfig{Authorization: &config.Authorization{Type: "Token", Credentials: config.Secret(o.service.Key)}},
		Concurrency:      o.concurrency,
		Observer:         NewRequestMetrics(reg),
	})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(c.Close)
	t := &Target{Client: c, DetailIDs: o.detailIDs, DetailLimit: o.detailLimit}
	p := NewPoller(t, PollerOptions{Timeout: 10 * time.Second})
	return &benchPipeline{svc: svc, poller: p, handler: NewHandler(p, NewMetrics(nil), nil, reg, 10*time.Second, slog.New(slog.DiscardHandler))}
}

// scrape serves one /metrics request and fails the benchmark on an
// unhealthy answer.
func (p *benchPipeline) scrape(b *testing.B) {
	req := httptest.NewRequest(http.MethodGet, "/metrics", nil)
	w := httptest.NewRecorder()
	p.handler.ServeHTTP(w, req)
	if w.Code != http.StatusOK {
		b.Fatalf("scrape answered %d", w.Code)
	}
}

// poll runs one poll and fails the benchmark unless every endpoint
// answered well.
func (p *benchPipeline) poll(b *testing.B) *Snapshot {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s := p.poller.Poll(ctx)
	for ep, st := range s.Endpoints {
		if !(st.Err == nil) {
			b.Fatalf("endpoint %s failed: %v", ep, st.Err)
		}
	}
	return s
}

// BenchmarkFanOut polls a service that takes 50 ms for every answer, with
// 20 detail views at a concurrency of 8, and reports the wall time of a
// poll against the critical path the concurrency allows:
//
//   - explicit ids: root, projects, locations and 20 details are
//     independent, so 23 requests in ceil(23/8) = 3 rounds: 150 ms;
//   - ids from the list: the first page of locations comes first (50 ms,
//     alongside root and projects), then 20 details in ceil(20/8) = 3
//     rounds: 200 ms.
func BenchmarkFanOut(b *testing.B) {
	const latency = 50 * time.Millisecond
	const concurrency, details = 8, 20
	ids := make([]int64, details)
	for i := range ids {
		ids[i] = int64(i + 1)
	}
	for _, tc := range []struct {
		name     string
		o        benchOptions
		critical time.Duration
	}{
		{"detail-ids", benchOptions{detailIDs: ids}, rounds(3+details, concurrency) * latency},
		{"detail-limit", benchOptions{detailLimit: details}, latency + rounds(details, concurrency)*latency},
	} {
		b.Run(tc.name, func(b *testing.B) {
			tc.o.concurrency = concurrency
			tc.o.service = sampleservice.Options{Locations: 300, PageSize: 100, Latency: latency}
			p := newBenchPipeline(b, tc.o)
			var total time.Duration
			ops := 0
			for b.Loop() {
				start := time.Now()
				if s := p.poll(b); len(s.Details) != details {
					b.Fatalf("%d details, want %d", len(s.Details), details)
				}
				total += time.Since(start)
				ops++
			}
			wall := total / time.Duration(ops)
			b.ReportMetric(float64(wall.Microseconds())/1e3, "wall-ms")
			b.ReportMetric(float64(tc.critical.Microseconds())/1e3, "critical-ms")
			b.ReportMetric(float64(wall)/float64(tc.critical), "x-critical")
			b.ReportMetric(float64(p.svc.MaxInFlight()), "max-in-flight")
		})
	}
}

// rounds is how many rounds n requests take at concurrency c.
func rounds(n, c int) time.Duration { return time.Duration(math.Ceil(float64(n) / float64(c))) }

// BenchmarkServiceSize scrapes services of 1k, 100k and 1M locations served
// as envelopes of 100 entries that carry count, with the detail views of the
// first 5 locations. Requests per scrape must be the same for all sizes, and
// so must the time per scrape.
func BenchmarkServiceSize(b *testing.B) {
	for _, n := range []int{1_000, 100_000, 1_000_000} {
		b.Run("locations="+strconv.Itoa(n), func(b *testing.B) {
			p := newBenchPipeline(b, benchOptions{
				service:     sampleservice.Options{Locations: n, PageSize: 100},
				detailLimit: 5,
			})
			p.poll(b) // warm the connections up
			p.svc.ResetStats()
			ops := 0
			for b.Loop() {
				if s := p.poll(b); s.Locations.Value != int64(n) {
					b.Fatalf("counted %d locations, want %d", s.Locations.Value, n)
				}
				ops++
			}
			b.ReportMetric(float64(p.svc.TotalRequests())/float64(ops), "requests/scrape")
		})
	}
}

// BenchmarkSharedPoll sends bursts of 20 concurrent scrapes to a service
// that takes 20 ms per answer; each burst must cost exactly one poll.
func BenchmarkSharedPoll(b *testing.B) {
	const scrapes = 20
	p := newBenchPipeline(b, benchOptions{service: sampleservice.Options{PageSize: 50, Latency: 20 * time.Millisecond}})
	p.svc.ResetStats()
	ops := 0
	for b.Loop() {
		var wg sync.WaitGroup
		start := make(chan struct{})
		for range scrapes {
			wg.Go(func() {
				<-start
				p.scrape(b)
			})
		}
		close(start)
		wg.Wait()
		ops++
	}
	b.ReportMetric(float64(p.svc.Requests(sampleservice.EndpointRoot))/float64(ops), "polls/burst")
	b.ReportMetric(float64(p.svc.TotalRequests())/float64(ops), "requests/burst")
}

// BenchmarkSequentialScrapes serves whole /metrics scrapes one after the
// other at the default settings (no detail views, concurrency 4) against
// the demo's service without its latency. ns/op includes the service's own
// work; the bench command measures the exporter's CPU alone.
func BenchmarkSequentialScrapes(b *testing.B) {
	o := sampleservice.DefaultOptions()
	o.Latency, o.Jitter = 0, 0
	p := newBenchPipeline(b, benchOptions{service: o})
	p.scrape(b)
	b.ReportAllocs()
	for b.Loop() {
		p.scrape(b)
	}
}

// BenchmarkDetailTurns queues and picks the detail views of a subset of
// 10,000 locations, the oldest check first, as one poll does.
func BenchmarkDetailTurns(b *testing.B) {
	const n = 10000
	p := NewPoller(&Target{Client: newFake(n), DetailLimit: n}, PollerOptions{})
	ids := make([]int64, n)
	for i := range ids {
		ids[i] = int64(i + 1)
		p.checks[ids[i]] = locationState{Checked: time.Unix(int64(n-i), 0)}
	}
	for b.Loop() {
		c := &poll{start: time.Now(), horizon: time.Now().Add(time.Hour), wake: make(chan struct{}, 1), closed: true, subset: make(map[int64]bool)}
		p.enqueue(c, ids)
		for range n {
			p.nextDetail(c)
		}
	}
}
