package collector

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/prometheus/common/config"
	"github.com/prometheus/common/promslog"

	"github.com/deployment-service/deployment_service_exporter/client"
	"github.com/deployment-service/deployment_service_exporter/sampleservice"
)

// rig is one exporter pipeline (client, poller, handler) watching one
// sample service on loopback.
type rig struct {
	svc      *sampleservice.Service
	srv      *httptest.Server
	target   *Target
	poller   *Poller
	metrics  *Metrics
	handler  http.Handler
	longLive *prometheus.Registry
	requests *RequestMetrics
	stats    *TargetStats // counts polls once a test sets it as the poller's
	logs     *syncBuffer
}

type rigOptions struct {
	service     sampleservice.Options
	client      func(*client.Config)
	detailIDs   []int64
	detailLimit int
	infoFields  []string
	timeout     time.Duration
	minInterval time.Duration
	// wrap, when set, stands between the sample service and the network,
	// so that a test can hold or order answers.
	wrap func(http.Handler) http.Handler
	// logWrap, when set, stands between the poller and its log handler.
	logWrap func(slog.Handler) slog.Handler
}

func newRig(t *testing.T, o rigOptions) *rig {
	t.Helper()
	if o.service.Key == "" {
		o.service.Key = "rig-key-0f1e2d3c"
	}
	r := &rig{svc: sampleservice.New(o.service), logs: &syncBuffer{}}
	var h http.Handler = r.svc
	if o.wrap != nil {
		h = o.wrap(h)
	}
	r.srv = httptest.NewServer(h)
	t.Cleanup(r.srv.Close)
	u, _ := url.Parse(r.srv.URL + r.svc.Prefix())
	r.longLive = prometheus.NewPedanticRegistry()
	r.requests = NewRequestMetrics(r.longLive)
	cfg := client.Config{
		BaseURL:          u,
		HTTPClientConfig: config.HTTPClientConfig{Authorization: &config.Authorization{Type: "Token", Credentials: config.Secret(o.service.Key)}},
		Observer:         r.requests,
	}
	if o.client != nil {
		o.client(&cfg)
	}
	c, err := client.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	if o.timeout == 0 {
		// Long enough for any healthy poll on a busy machine; tests about
		// deadlines set their own.
		o.timeout = 30 * time.Second
	}
	level := promslog.NewLevel()
	_ = level.Set("debug")
	logger := promslog.New(&promslog.Config{Level: level, Writer: r.logs})
	if o.logWrap != nil {
		logger = slog.New(o.logWrap(logger.Handler()))
	}
	r.target = &Target{Client: c, DetailIDs: o.detailIDs, DetailLimit: o.detailLimit, InfoFields: o.infoFields}
	r.poller = NewPoller(r.target, PollerOptions{Timeout: o.timeout, MinInterval: o.minInterval, Logger: logger})
	r.metrics = NewMetrics(o.infoFields)
	r.stats = NewTargetStats(r.srv.URL, "")
	r.handler = NewHandler(r.poller, r.metrics, r.stats, r.longLive, o.timeout, logger)
	return r
}

// gather polls once and returns a pedantic registry holding the result.
// The poll has the rig's whole timeout.
func (r *rig) gather(t *testing.T) prometheus.Gatherer {
	t.Helper()
	return r.registry(r.poller.Poll(context.Background()))
}

// registry returns the metrics of s as the handler serves them.
func (r *rig) registry(s *Snapshot) prometheus.Gatherer {
	return prometheus.Gatherers{r.metrics.gatherer(s, nil)}
}

// hold puts a closed gate in front of the given endpoints of the sample
// service (all of them when none is named). The gate opens when the test
// ends, so that no handler is left waiting.
func (r *rig) hold(t *testing.T, endpoints ...string) *sampleservice.Gate {
	t.Helper()
	g := r.svc.Hold(endpoints...)
	t.Cleanup(g.Open)
	return g
}

// heldLog is a log handler that holds the first record match accepts
// until release is closed, closing held when it does: a pause at a chosen
// step of the poller, through its logger.
type heldLog struct {
	slog.Handler
	match         func(slog.Record) bool
	first         *atomic.Bool
	held, release chan struct{}
}

func newHeldLog(match func(slog.Record) bool) *heldLog {
	return &heldLog{match: match, first: &atomic.Bool{}, held: make(chan struct{}), release: make(chan struct{})}
}

func (h *heldLog) wrap(next slog.Handler) slog.Handler {
	c := *h
	c.Handler = next
	return &c
}

func (h *heldLog) Handle(ctx context.Context, r slog.Record) error {
	if h.match(r) && h.first.CompareAndSwap(false, true) {
		close(h.held)
		<-h.release
	}
	return h.Handler.Handle(ctx, r)
}

func (h *heldLog) WithAttrs(as []slog.Attr) slog.Handler { return h.wrap(h.Handler.WithAttrs(as)) }

func (h *heldLog) WithGroup(name string) slog.Handler { return h.wrap(h.Handler.WithGroup(name)) }

// message matches the records with message m.
func message(m string) func(slog.Record) bool {
	return func(r slog.Record) bool { return r.Message == m }
}

// await waits until cond holds for the gate's counts.
func await(t *testing.T, g *sampleservice.Gate, cond func(sampleservice.GateCounts) bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), waitLimit)
	defer cancel()
	if err := g.Await(ctx, cond); err != nil {
		t.Fatal(err)
	}
}

// withMoreTime runs try with a budget of 1 s, then 4 s, then 16 s, until
// it reports true. It serves tests whose subject is a real deadline: the
// work that has to come before the deadline takes a busy machine longer,
// so try returns false when that work did not fit, and the scenario runs
// again with more time instead of failing.
func withMoreTime(t *testing.T, try func(budget time.Duration) bool) {
	t.Helper()
	for _, budget := range []time.Duration{time.Second, 4 * time.Second, 16 * time.Second} {
		if try(budget) {
			return
		}
		t.Logf("the machine was too busy for the scenario within %v; trying again with more time", budget)
	}
	t.Fatal("the scenario never ran as planned, even with 16s")
}

// scrape serves one /metrics request through the handler.
func (r *rig) scrape(t *testing.T, timeoutHeader string) string {
	t.Helper()
	req := httptest.NewRequest(http.MethodGet, "/metrics", nil)
	if timeoutHeader != "" {
		req.Header.Set(scrapeTimeoutHeader, timeoutHeader)
	}
	rec := httptest.NewRecorder()
	r.handler.ServeHTTP(rec, req)
	if rec.Code != http.StatusOK {
		t.Fatalf("scrape answered %d", rec.Code)
	}
	return rec.Body.String()
}

func compare(t *testing.T, g prometheus.Gatherer, want string, names ...string) {
	t.Helper()
	if err := testutil.GatherAndCompare(g, strings.NewReader(want), names...); err != nil {
		t.Error(err)
	}
}

const (
	upHelp = `# HELP deployment_service_up Whether the API root, project list and location list all answered well in this scrape (1) or not (0).
# TYPE deployment_service_up gauge
`
	endpointUpHelp = `# HELP deployment_service_endpoint_up Whether the endpoint answered well in this scrape: 2xx and valid JSON of the expected shape on every page read.
# TYPE deployment_service_endpoint_up gauge
`
	statusHelp = `# HELP deployment_service_endpoint_status_code HTTP status of the endpoint's last response in this scrape; 0 when none came. For location_detail: when any detail view failed, the highest status among the failed ones (0 only when none of them got a response); else 200.
# TYPE deployment_service_endpoint_status_code gauge
`
	projectsHelp = `# HELP deployment_service_projects Projects the key can access; absent when the list could not be read.
# TYPE deployment_service_projects gauge
`
	locationsHelp = `# HELP deployment_service_locations Locations listed; absent when the list could not be read.
# TYPE deployment_service_locations gauge
`
	locationUpHelp = `# HELP deployment_service_location_up Whether the location's detail view answered well at its last check.
# TYPE deployment_service_location_up gauge
`
)

func TestScrapeHealthyService(t *testing.T) {
	r := newRig(t, rigOptions{
		service:    sampleservice.Options{Projects: 4, Locations: 30, PageSize: 10},
		detailIDs:  []int64{3, 25},
		infoFields: []string{"id"},
	})
	reg := r.gather(t)
	compare(t, reg, upHelp+"deployment_service_up 1\n"+
		endpointUpHelp+`deployment_service_endpoint_up{endpoint="location_detail"} 1
deployment_service_endpoint_up{endpoint="locations"} 1
deployment_service_endpoint_up{endpoint="projects"} 1
deployment_service_endpoint_up{endpoint="root"} 1
`+statusHelp+`deployment_service_endpoint_status_code{endpoint="location_detail"} 200
deployment_service_endpoint_status_code{endpoint="locations"} 200
deployment_service_endpoint_status_code{endpoint="projects"} 200
deployment_service_endpoint_status_code{endpoint="root"} 200
`+projectsHelp+"deployment_service_projects 4\n"+locationsHelp+"deployment_service_locations 30\n"+
		locationUpHelp+`deployment_service_location_up{location_id="25"} 1
deployment_service_location_up{location_id="3"} 1
# HELP deployment_service_location_info Selected fields of the location's detail view at its last check, as labels; always 1.
# TYPE deployment_service_location_info gauge
deployment_service_location_info{id="25",location_id="25"} 1
deployment_service_location_info{id="3",location_id="3"} 1
`,
		"deployment_service_up", "deployment_service_endpoint_up", "deployment_service_endpoint_status_code",
		"deployment_service_projects", "deployment_service_locations", "deployment_service_location_up",
		"deployment_service_location_info")
	for name, want := range map[string]int{
		"deployment_service_endpoint_duration_seconds":        4,
		"deployment_service_location_detail_duration_seconds": 2,
		"deployment_service_scrape_duration_seconds":          1,
		"deployment_service_poll_timestamp_seconds":           1,
		"deployment_service_hold_off_until_timestamp_seconds": 1,
	} {
		if n, err := testutil.GatherAndCount(reg, name); err != nil || n != want {
			t.Errorf("%s: %d series (%v), want %d", name, n, err, want)
		}
	}
	// With counts in the envelopes and explicit ids, one page of each list
	// is enough.
	if n := r.svc.Requests(sampleservice.EndpointLocations); n != 1 {
		t.Errorf("locations requested %d times, want 1", n)
	}
	if problems, err := testutil.GatherAndLint(prometheus.Gatherers{reg, r.longLive}); err != nil || len(problems) > 0 {
		t.Errorf("lint: %v %v", problems, err)
	}
}

func TestDetailSubsetFromTheList(t *testing.T) {
	r := newRig(t, rigOptions{
		service:     sampleservice.Options{Locations: 30, PageSize: 3},
		detailLimit: 4,
	})
	compare(t, r.gather(t), locationUpHelp+`deployment_service_location_up{location_id="1"} 1
deployment_service_location_up{location_id="2"} 1
deployment_service_location_up{location_id="3"} 1
deployment_service_location_up{location_id="4"} 1
`+locationsHelp+"deployment_service_locations 30\n", "deployment_service_location_up", "deployment_service_locations")
	// The count comes from the envelope: two pages hold the four ids.
	if n := r.svc.Requests(sampleservice.EndpointLocations); n != 2 {
		t.Errorf("locations requested %d times, want 2", n)
	}
	if n := r.svc.Requests(sampleservice.EndpointLocationDetail); n != 4 {
		t.Errorf("details requested %d times, want 4", n)
	}
}

func TestPlainListsAreCounted(t *testing.T) {
	r := newRig(t, rigOptions{service: sampleservice.Options{Projects: 7, Locations: 123}})
	compare(t, r.gather(t), projectsHelp+"deployment_service_projects 7\n"+locationsHelp+"deployment_service_locations 123\n",
		"deployment_service_projects", "deployment_service_locations")
}

func TestPartialFailure(t *testing.T) {
	r := newRig(t, rigOptions{service: sampleservice.Options{Projects: 3, Locations: 9, PageSize: 5}})
	r.svc.SetFault(sampleservice.EndpointLocations, sampleservice.Fault{Status: 500})
	reg := r.gather(t)
	compare(t, reg, upHelp+"deployment_service_up 0\n"+endpointUpHelp+`deployment_service_endpoint_up{endpoint="locations"} 0
deployment_service_endpoint_up{endpoint="projects"} 1
deployment_service_endpoint_up{endpoint="root"} 1
`+statusHelp+`deployment_service_endpoint_status_code{endpoint="locations"} 500
deployment_service_endpoint_status_code{endpoint="projects"} 200
deployment_service_endpoint_status_code{endpoint="root"} 200
`+projectsHelp+"deployment_service_projects 3\n",
		"deployment_service_up", "deployment_service_endpoint_up", "deployment_service_endpoint_status_code",
		"deployment_service_projects", "deployment_service_locations")
	compare(t, r.longLive, `# HELP deployment_service_requests_total Requests sent to the deployment service API, by HTTP status code (none when no response came).
# TYPE deployment_service_requests_total counter
deployment_service_requests_total{code="200",endpoint="projects"} 1
deployment_service_requests_total{code="200",endpoint="root"} 1
deployment_service_requests_total{code="500",endpoint="locations"} 1
`, "deployment_service_requests_total")
}

// TestFailedListIsNeverZero runs every kind of broken list: its count must
// be absent and its endpoint down, never a count of zero.
func TestFailedListIsNeverZero(t *testing.T) {
	foreign := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "" {
			t.Errorf("the foreign origin got an Authorization header")
		}
		_, _ = w.Write([]byte(`[]`))
	}))
	defer foreign.Close()
	tests := []struct {
		name   string
		fault  sampleservice.Fault
		status string
		reason client.Reason
	}{
		{"server error", sampleservice.Fault{Status: 502}, "502", client.ReasonHTTPStatus},
		{"key refused", sampleservice.Fault{Status: 403}, "403", client.ReasonHTTPStatus},
		{"malformed JSON", sampleservice.Fault{Body: `{"results": [{"id": 1}`}, "200", client.ReasonInvalidBody},
		{"HTML error page", sampleservice.Fault{Body: `<html>oops</html>`}, "200", client.ReasonInvalidBody},
		{"wrong shape", sampleservice.Fault{Body: `{"count": 3}`}, "200", client.ReasonInvalidBody},
		{"truncated body", sampleservice.Fault{Truncate: true}, "200", client.ReasonNetwork},
		{"oversized body", sampleservice.Fault{OversizeBytes: 200 << 10}, "200", client.ReasonTooLarge},
		{"foreign next link", sampleservice.Fault{NextURL: foreign.URL + "/api/projects/locations/?page=2"}, "200", client.ReasonPagination},
		{"pagination loop", sampleservice.Fault{LoopNext: true}, "200", client.ReasonPagination},
		{"redirect to another port", sampleservice.Fault{RedirectTo: foreign.URL + "/api/projects/locations/"}, "302", client.ReasonHTTPStatus},
		{"second page fails", sampleservice.Fault{Status: 500, OnPage: 2}, "500", client.ReasonHTTPStatus},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := newRig(t, rigOptions{
				service: sampleservice.Options{Locations: 20, PageSize: 5, OmitCount: true},
				client:  func(c *client.Config) { c.MaxResponseBytes = 100 << 10 },
			})
			r.svc.SetFault(sampleservice.EndpointLocations, tt.fault)
			reg := r.gather(t)
			compare(t, reg, endpointUpHelp+`deployment_service_endpoint_up{endpoint="locations"} 0
deployment_service_endpoint_up{endpoint="projects"} 1
deployment_service_endpoint_up{endpoint="root"} 1
`+statusHelp+`deployment_service_endpoint_status_code{endpoint="locations"} `+tt.status+`
deployment_service_endpoint_status_code{endpoint="projects"} 200
deployment_service_endpoint_status_code{endpoint="root"} 200
`, "deployment_service_endpoint_up", "deployment_service_endpoint_status_code", "deployment_service_locations")
			if n := r.requests.errorCount("locations", tt.reason); n != 1 {
				t.Errorf("request_errors_total{reason=%q} = %v, want 1", tt.reason, n)
			}
		})
	}
}

func TestHoldOffAfterRetryAfter(t *testing.T) {
	r := newRig(t, rigOptions{
		service:   sampleservice.Options{Locations: 10, PageSize: 5},
		detailIDs: []int64{2},
	})
	// The 429 comes last, once the other requests of this poll (root,
	// locations, one detail view) have reached the service, so they are
	// sent before the hold-off starts. A minute's hold-off outlasts the
	// test however slow the machine.
	r.svc.SetFault(sampleservice.EndpointProjects, sampleservice.Fault{Status: 429, RetryAfter: "60"})
	g := r.hold(t, sampleservice.EndpointProjects)
	polled := make(chan prometheus.Gatherer, 1)
	go func() { polled <- r.gather(t) }()
	waitFor(t, func() bool { return r.svc.TotalRequests() == 4 })
	g.Open()
	first := <-polled
	until, _ := r.target.Client.HoldOff()
	if until.IsZero() {
		t.Fatal("no hold-off after a 429 with Retry-After")
	}
	// The poll that met the 429 already tells until when nothing is sent.
	holdOffGauge(t, first, until)
	compare(t, first, statusHelp+`deployment_service_endpoint_status_code{endpoint="location_detail"} 200
deployment_service_endpoint_status_code{endpoint="locations"} 200
deployment_service_endpoint_status_code{endpoint="projects"} 429
deployment_service_endpoint_status_code{endpoint="root"} 200
`, "deployment_service_endpoint_status_code")

	// Inside the hold-off nothing is sent and every endpoint is down with
	// 429; the location keeps the result of its last check.
	sent := r.svc.TotalRequests()
	held := r.gather(t)
	holdOffGauge(t, held, until)
	if n := r.svc.TotalRequests(); n != sent {
		t.Errorf("%d requests sent during the hold-off", n-sent)
	}
	compare(t, held, upHelp+"deployment_service_up 0\n"+endpointUpHelp+`deployment_service_endpoint_up{endpoint="location_detail"} 0
deployment_service_endpoint_up{endpoint="locations"} 0
deployment_service_endpoint_up{endpoint="projects"} 0
deployment_service_endpoint_up{endpoint="root"} 0
`+statusHelp+`deployment_service_endpoint_status_code{endpoint="location_detail"} 429
deployment_service_endpoint_status_code{endpoint="locations"} 429
deployment_service_endpoint_status_code{endpoint="projects"} 429
deployment_service_endpoint_status_code{endpoint="root"} 429
`+locationUpHelp+`deployment_service_location_up{location_id="2"} 1
`, "deployment_service_up", "deployment_service_endpoint_up", "deployment_service_endpoint_status_code",
		"deployment_service_location_up", "deployment_service_projects", "deployment_service_locations")

	// Once the time given has passed, polling resumes: shown on a service
	// asking for the shortest hold-off a header can give, a second.
	r = newRig(t, rigOptions{service: sampleservice.Options{Locations: 10, PageSize: 5}, detailIDs: []int64{2}})
	r.svc.SetFault(sampleservice.EndpointProjects, sampleservice.Fault{Status: 429, RetryAfter: "1"})
	r.gather(t)
	until, _ = r.target.Client.HoldOff()
	if until.IsZero() {
		t.Fatal("no hold-off after a 429 with Retry-After: 1")
	}
	r.svc.ClearFaults()
	sent = r.svc.TotalRequests()
	time.Sleep(time.Until(until) + 10*time.Millisecond)
	after := r.gather(t)
	compare(t, after, upHelp+"deployment_service_up 1\n", "deployment_service_up")
	holdOffGauge(t, after, time.Time{})
	if r.svc.TotalRequests() == sent {
		t.Error("no requests sent after the hold-off ended")
	}
}

// TestHoldOffWithADetailLimit checks that a held-off scrape reports the
// detail subset's endpoint too, although no list gave ids to fetch.
func TestHoldOffWithADetailLimit(t *testing.T) {
	r := newRig(t, rigOptions{service: sampleservice.Options{Locations: 10}, detailLimit: 3})
	// The 503 comes once both lists have reached the service.
	r.svc.SetFault(sampleservice.EndpointRoot, sampleservice.Fault{Status: 503, RetryAfter: "60"})
	g := r.hold(t, sampleservice.EndpointRoot)
	polled := make(chan prometheus.Gatherer, 1)
	go func() { polled <- r.gather(t) }()
	waitFor(t, func() bool {
		return r.svc.Requests(sampleservice.EndpointProjects) == 1 && r.svc.Requests(sampleservice.EndpointLocations) == 1
	})
	g.Open()
	<-polled
	sent := r.svc.TotalRequests()
	compare(t, r.gather(t), endpointUpHelp+`deployment_service_endpoint_up{endpoint="location_detail"} 0
deployment_service_endpoint_up{endpoint="locations"} 0
deployment_service_endpoint_up{endpoint="projects"} 0
deployment_service_endpoint_up{endpoint="root"} 0
`+statusHelp+`deployment_service_endpoint_status_code{endpoint="location_detail"} 503
deployment_service_endpoint_status_code{endpoint="locations"} 503
deployment_service_endpoint_status_code{endpoint="projects"} 503
deployment_service_endpoint_status_code{endpoint="root"} 503
`, "deployment_service_endpoint_up", "deployment_service_endpoint_status_code")
	if n := r.svc.TotalRequests(); n != sent {
		t.Errorf("%d requests sent during the hold-off", n-sent)
	}
}

func TestMinIntervalAnswersFromTheLastPoll(t *testing.T) {
	r := newRig(t, rigOptions{service: sampleservice.Options{Locations: 10}, minInterval: time.Hour})
	a, b := r.gather(t), r.gather(t)
	if n := r.svc.TotalRequests(); n != 3 {
		t.Errorf("two scrapes inside the interval sent %d requests, want 3", n)
	}
	ta, _ := testutil.GatherAndCount(a, "deployment_service_poll_timestamp_seconds")
	if ta != 1 {
		t.Fatal("no poll timestamp")
	}
	if fa, fb := pollTimestamp(t, a), pollTimestamp(t, b); fa != fb {
		t.Errorf("poll timestamps differ: %v, %v", fa, fb)
	}
}

// TestRateLimitBoundsRequests runs a poll at one request per 100 seconds:
// the burst of one is sent, and every other request waits for its turn
// within the poll and fails as a timeout when the poll ends. Locations
// that no request reached are no one's failure: never checked, they have
// no series. It counts requests instead of timing them: a poll would have
// to last 100 seconds for a second turn, so a slow machine sees the same.
func TestRateLimitBoundsRequests(t *testing.T) {
	withMoreTime(t, func(timeout time.Duration) bool {
		r := newRig(t, rigOptions{
			service:   sampleservice.Options{Locations: 50},
			client:    func(c *client.Config) { c.RateLimit = 0.01 },
			detailIDs: []int64{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12},
			timeout:   timeout,
		})
		body := r.scrape(t, "")
		n := r.svc.TotalRequests()
		if n == 0 {
			return false // too busy to send even the first request in time
		}
		if n > 1 {
			t.Errorf("%d requests in a poll at one per 100s", n)
			return true
		}
		if strings.Contains(body, "deployment_service_location_up{") {
			t.Errorf("locations the rate limit kept unchecked have series:\n%s", body)
		}
		// The waits end with the poll: the two lists and the detail views
		// the workers had started waiting are counted as timeouts, and
		// none waits for its turn past the poll.
		waitFor(t, func() bool { return r.timeouts() >= 2 })
		if n := r.timeouts(); n > 2+client.DefaultConcurrency {
			t.Errorf("%v timeouts: more requests waited than the workers start", n)
		}
		return true
	})
}

// timeouts sums request_errors_total{reason="timeout"} over the endpoints.
func (r *rig) timeouts() float64 {
	sum := 0.0
	for _, ep := range client.Endpoints {
		sum += r.requests.errorCount(ep, client.ReasonTimeout)
	}
	return sum
}

// TestConcurrencyIsBounded lets the requests through the gate one at a
// time, each time only once two of them are held: a third one in flight
// would be held too, and show in the service's count.
func TestConcurrencyIsBounded(t *testing.T) {
	r := newRig(t, rigOptions{
		service:   sampleservice.Options{Locations: 50},
		client:    func(c *client.Config) { c.Concurrency = 2 },
		detailIDs: []int64{1, 2, 3, 4, 5, 6, 7, 8},
	})
	g := r.hold(t)
	polled := make(chan prometheus.Gatherer, 1)
	go func() { polled <- r.gather(t) }()
	for left := 3 + 8; left > 0; left-- {
		await(t, g, func(c sampleservice.GateCounts) bool { return c.Held >= min(2, left) })
		g.Let(1)
	}
	compare(t, <-polled, upHelp+"deployment_service_up 1\n", "deployment_service_up")
	if m := r.svc.MaxInFlight(); m != 2 {
		t.Errorf("%d requests in flight at most with --api.concurrency=2, want 2", m)
	}
}

// TestListsTakeTheFirstSlots runs with one slot and explicit ids: the
// details start alongside the lists, yet the lists must reach the service
// first, every time.
func TestListsTakeTheFirstSlots(t *testing.T) {
	r := newRig(t, rigOptions{
		service:   sampleservice.Options{Locations: 20, Latency: 5 * time.Millisecond},
		client:    func(c *client.Config) { c.Concurrency = 1 },
		detailIDs: []int64{1, 2, 3, 4},
	})
	for i := range 10 {
		r.svc.ResetStats()
		r.gather(t)
		log := r.svc.Log()
		if len(log) != 7 {
			t.Fatalf("poll %d: %d requests, want 7", i, len(log))
		}
		for _, rec := range log[:3] {
			if rec.Endpoint == sampleservice.EndpointLocationDetail {
				t.Fatalf("poll %d: a detail view reached the service before the lists: %v", i, endpointsOf(log))
			}
		}
	}
}

func endpointsOf(log []sampleservice.RequestRecord) []string {
	var out []string
	for _, rec := range log {
		out = append(out, rec.Endpoint)
	}
	return out
}

func TestScrapeAfterAnAbandonedPollStartsAFreshOne(t *testing.T) {
	// The abandoned poll winds down only when the test lets it: the next
	// scrape comes while it still runs.
	windDown := newHeldLog(message("Poll abandoned: every scrape waiting for it gave up"))
	var closeOnce sync.Once
	letWindDown := func() { closeOnce.Do(func() { close(windDown.release) }) }
	t.Cleanup(letWindDown)
	r := newRig(t, rigOptions{service: sampleservice.Options{Locations: 10}, logWrap: windDown.wrap})
	g := r.hold(t)

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		r.handler.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest(http.MethodGet, "/metrics", nil).WithContext(ctx))
	}()
	await(t, g, func(c sampleservice.GateCounts) bool { return c.Held == 3 })
	cancel()
	<-done
	<-windDown.held
	g.Open()
	if body := r.scrape(t, ""); !strings.Contains(body, "deployment_service_up 1") {
		t.Errorf("the scrape after an abandoned one joined the dying poll:\n%s", body)
	}
	letWindDown()
}

func TestShortScrapeDoesNotBlankTheInterval(t *testing.T) {
	r := newRig(t, rigOptions{service: sampleservice.Options{Locations: 10}, minInterval: time.Minute})
	// Nothing answers before the short scrape's deadline.
	g := r.hold(t)
	if body := r.scrape(t, "0.0001"); !strings.Contains(body, "deployment_service_up 0") {
		t.Fatalf("a scrape with no time to poll reported the service up:\n%s", body)
	}
	g.Open()
	if body := r.scrape(t, ""); !strings.Contains(body, "deployment_service_up 1") {
		t.Errorf("a scrape with time to poll was answered from a poll that had none:\n%s", body)
	}
	// A poll that had time is reused inside the interval, as before.
	sent := r.svc.TotalRequests()
	r.scrape(t, "")
	if n := r.svc.TotalRequests(); n != sent {
		t.Errorf("%d requests inside the minimum interval", n-sent)
	}
}

func TestAbandonedScrapeCancelsItsPoll(t *testing.T) {
	r := newRig(t, rigOptions{service: sampleservice.Options{Locations: 10}, timeout: time.Minute})
	r.svc.SetFault(sampleservice.EndpointLocations, sampleservice.Fault{Delay: time.Minute})
	ctx, cancel := context.WithCancel(context.Background())
	req := httptest.NewRequest(http.MethodGet, "/metrics", nil).WithContext(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		r.handler.ServeHTTP(httptest.NewRecorder(), req)
	}()
	waitFor(t, func() bool { return r.svc.InFlight() > 0 })
	cancel() // Prometheus gave up on the scrape
	<-done
	waitFor(t, func() bool { return r.svc.InFlight() == 0 })
	if logs := r.logs.String(); strings.Contains(logs, "level=ERROR") {
		t.Errorf("an abandoned scrape logged errors:\n%s", logs)
	}
}

func TestNoGoroutineOutlivesItsScrape(t *testing.T) {
	before := runtime.NumGoroutine()
	r := newRig(t, rigOptions{
		service:   sampleservice.Options{Locations: 40, PageSize: 5, OmitCount: true},
		detailIDs: []int64{1, 2, 3},
	})
	faults := []sampleservice.Fault{
		{Delay: time.Minute}, {Status: 500}, {Body: "{"}, {Truncate: true}, {LoopNext: true}, {Status: 503, RetryAfter: "0"},
	}
	for i := range 60 {
		r.svc.SetFault(sampleservice.EndpointLocations, faults[i%len(faults)])
		r.svc.SetFault(sampleservice.EndpointLocationDetail, faults[(i+1)%len(faults)])
		r.scrape(t, "0.2")
	}
	// Only idle connections are closed: a request still hanging on a
	// connection would be a goroutine outliving its scrape.
	r.target.Client.Close()
	waitFor(t, func() bool { return runtime.NumGoroutine() <= before+4 })
}

func TestKeyNeverLeaks(t *testing.T) {
	r := newRig(t, rigOptions{service: sampleservice.Options{Locations: 10}, detailIDs: []int64{1}})
	key := r.svc.Key()
	r.svc.SetKey("another-key") // every request is now refused with 401
	body := r.scrape(t, "")
	r.svc.SetFault(sampleservice.EndpointRoot, sampleservice.Fault{Body: key + " is not JSON"})
	body += r.scrape(t, "")
	if !strings.Contains(body, `deployment_service_endpoint_status_code{endpoint="projects"} 401`) {
		t.Error("the refused key is not reported as 401")
	}
	logs := r.logs.String()
	if !strings.Contains(logs, "Poll failed") {
		t.Error("failures were not logged")
	}
	for where, text := range map[string]string{"metrics": body, "logs": logs} {
		if strings.Contains(text, key) {
			t.Errorf("the key appears in the %s", where)
		}
	}
}

func TestScrapeBudget(t *testing.T) {
	tests := []struct {
		header string
		limit  time.Duration
		want   time.Duration
	}{
		{"", 10 * time.Second, 10 * time.Second},
		{"junk", 10 * time.Second, 10 * time.Second},
		{"-1", 10 * time.Second, 10 * time.Second},
		{"NaN", 10 * time.Second, 10 * time.Second},
		{"+Inf", 10 * time.Second, 10 * time.Second},
		{"10", 30 * time.Second, 9500 * time.Millisecond},
		{"10", 5 * time.Second, 5 * time.Second},
		{"2", time.Minute, 1800 * time.Millisecond},
		{"0.3", time.Minute, 250 * time.Millisecond},
		{"0.05", time.Minute, 25 * time.Millisecond},
	}
	for _, tt := range tests {
		req := httptest.NewRequest(http.MethodGet, "/metrics", nil)
		if tt.header != "" {
			req.Header.Set(scrapeTimeoutHeader, tt.header)
		}
		if got := scrapeBudget(req, tt.limit); got != tt.want {
			t.Errorf("header %q limit %v: budget %v, want %v", tt.header, tt.limit, got, tt.want)
		}
	}
}

// waitLimit bounds the waits for events that take microseconds: it only
// turns a hang into a failure, far enough off that a busy machine cannot
// reach it.
const waitLimit = time.Minute

// waitFor polls cond until it holds.
func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(waitLimit)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("condition not met within %v", waitLimit)
		}
		time.Sleep(time.Millisecond)
	}
}

// syncBuffer is a log sink safe for the poll's goroutines.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

var _ io.Writer = (*syncBuffer)(nil)

func pollTimestamp(t *testing.T, g prometheus.Gatherer) float64 {
	t.Helper()
	return gaugeValue(t, g, "deployment_service_poll_timestamp_seconds")
}

// gaugeValue returns the value of the gauge without labels named name.
func gaugeValue(t *testing.T, g prometheus.Gatherer, name string) float64 {
	t.Helper()
	mfs, err := g.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name {
			return mf.GetMetric()[0].GetGauge().GetValue()
		}
	}
	t.Fatalf("no %s", name)
	return 0
}

// holdOffGauge checks deployment_service_hold_off_until_timestamp_seconds.
func holdOffGauge(t *testing.T, g prometheus.Gatherer, want time.Time) {
	t.Helper()
	w := 0.0
	if !want.IsZero() {
		w = float64(want.UnixMilli()) / 1e3
	}
	if got := gaugeValue(t, g, "deployment_service_hold_off_until_timestamp_seconds"); got != w {
		t.Errorf("hold_off_until_timestamp_seconds %v, want %v", got, w)
	}
}
