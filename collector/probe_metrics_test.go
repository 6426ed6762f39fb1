package collector

import (
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/deployment-service/deployment_service_exporter/client"
	"github.com/deployment-service/deployment_service_exporter/sampleservice"
)

// probeGatherer gathers what one /probe answers, parsed from its text.
func probeGatherer(t *testing.T, h http.Handler, query string) prometheus.Gatherer {
	t.Helper()
	return prometheus.GathererFunc(func() ([]*dto.MetricFamily, error) {
		code, body := probe(t, h, query)
		if code != http.StatusOK {
			return nil, fmt.Errorf("probe answered %d: %s", code, body)
		}
		p := expfmt.NewTextParser(model.UTF8Validation)
		byName, err := p.TextToMetricFamilies(strings.NewReader(body))
		if err != nil {
			return nil, err
		}
		out := make([]*dto.MetricFamily, 0, len(byName))
		for _, mf := range byName {
			out = append(out, mf)
		}
		slices.SortFunc(out, func(a, b *dto.MetricFamily) int { return strings.Compare(a.GetName(), b.GetName()) })
		return out, nil
	})
}

const (
	requestsHelp = `# HELP deployment_service_requests_total Requests sent to the deployment service API, by HTTP status code (none when no response came).
# TYPE deployment_service_requests_total counter
`
	requestErrorsHelp = `# HELP deployment_service_request_errors_total Failed requests to the deployment service API, by reason.
# TYPE deployment_service_request_errors_total counter
`
)

// requestsText is the exposition of requests_total with n requests per
// endpoint, all with the given code.
func requestsText(code string, n int) string {
	var b strings.Builder
	b.WriteString(requestsHelp)
	for _, ep := range client.Endpoints {
		fmt.Fprintf(&b, "deployment_service_requests_total{code=%q,endpoint=%q} %d\n", code, ep, n)
	}
	return b.String()
}

// errorsText is the exposition of request_errors_total: every endpoint ×
// reason pair, n for the given reason, 0 for the others.
func errorsText(reason client.Reason, n int) string {
	var b strings.Builder
	b.WriteString(requestErrorsHelp)
	for _, ep := range client.Endpoints {
		for _, r := range client.Reasons {
			v := 0
			if r == reason {
				v = n
			}
			fmt.Fprintf(&b, "deployment_service_request_errors_total{endpoint=%q,reason=%q} %d\n", ep, r, v)
		}
	}
	return b.String()
}

// closedURL is the URL of a port on 127.0.0.1 where nothing listens.
func closedURL(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	u := "http://" + ln.Addr().String()
	_ = ln.Close()
	return u
}

// everyEndpoint sets f on every endpoint of svc.
func everyEndpoint(svc *sampleservice.Service, f sampleservice.Fault) {
	for _, ep := range []string{sampleservice.EndpointRoot, sampleservice.EndpointProjects, sampleservice.EndpointLocations, sampleservice.EndpointLocationDetail} {
		svc.SetFault(ep, f)
	}
}

// TestProbeCountsFailedRequests probes a failing service three times:
// the third answer holds the requests and errors of all three polls, for
// every endpoint (root, both lists and the one detail view).
func TestProbeCountsFailedRequests(t *testing.T) {
	tests := []struct {
		name   string
		fault  sampleservice.Fault
		key    string // the module's key; the service's is "k-probe"
		down   bool   // the target's port is closed
		code   string
		reason client.Reason
	}{
		{name: "500", fault: sampleservice.Fault{Status: 500}, code: "500", reason: client.ReasonHTTPStatus},
		{name: "401", key: "wrong-key", code: "401", reason: client.ReasonHTTPStatus},
		{name: "429", fault: sampleservice.Fault{Status: 429}, code: "429", reason: client.ReasonHTTPStatus},
		{name: "refused", down: true, code: "none", reason: client.ReasonNetwork},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			svc := sampleservice.New(sampleservice.Options{Key: "k-probe", Locations: 5})
			srv := httptest.NewServer(svc)
			defer srv.Close()
			everyEndpoint(svc, tt.fault)
			target := srv.URL
			if tt.down {
				target = closedURL(t)
			}
			key := "k-probe"
			if tt.key != "" {
				key = tt.key
			}
			h := NewProbeHandler(staticLookup(map[string]TargetSettings{"default": keySettings(key)}), nil, nil)
			query := "target=" + url.QueryEscape(target)
			for range 2 {
				probe(t, h, query)
			}
			if err := testutil.GatherAndCompare(probeGatherer(t, h, query),
				strings.NewReader(requestsText(tt.code, 3)+errorsText(tt.reason, 3)),
				"deployment_service_requests_total", "deployment_service_request_errors_total"); err != nil {
				t.Error(err)
			}
		})
	}
}

// TestProbeCountsTimeouts: requests cut short by the poll's deadline are
// counted as sent without an answer, and as timeouts. The poll ends at its
// deadline whatever the machine's speed; the test waits for each poll to
// have ended before it looks.
func TestProbeCountsTimeouts(t *testing.T) {
	svc := sampleservice.New(sampleservice.Options{Key: "k-probe", Locations: 5})
	srv := httptest.NewServer(svc)
	defer srv.Close()
	everyEndpoint(svc, sampleservice.Fault{Delay: time.Hour})
	s := keySettings("k-probe")
	s.Timeout = 200 * time.Millisecond
	h := NewProbeHandler(staticLookup(map[string]TargetSettings{"default": s}), nil, nil)
	target, err := client.ParseTarget(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	e := defaultEntry(t, h, target)
	var body string
	for i := range 2 {
		_, body = probe(t, h, "target="+url.QueryEscape(srv.URL))
		// The poll's requests are counted once it has cut them.
		waitFor(t, func() bool {
			return testutil.CollectAndCompare(e.requests, strings.NewReader(requestsText("none", i+1)+errorsText(client.ReasonTimeout, i+1)),
				"deployment_service_requests_total", "deployment_service_request_errors_total") == nil
		})
	}
	if err := testutil.CollectAndCompare(e.requests,
		strings.NewReader(requestsText("none", 2)+errorsText(client.ReasonTimeout, 2)),
		"deployment_service_requests_total", "deployment_service_request_errors_total"); err != nil {
		t.Error(err)
	}
	if !strings.Contains(body, `deployment_service_request_errors_total{endpoint="root",reason="timeout"} `) {
		t.Errorf("the probe does not answer the timeouts:\n%s", body)
	}
}

// TestProbeAnswersEveryFamily: a probe answers every deployment_service_*
// family of /metrics but the exporter's own, with the error counters
// pre-initialised, and nothing exporter-internal.
func TestProbeAnswersEveryFamily(t *testing.T) {
	svc := sampleservice.New(sampleservice.Options{Key: "k-probe", Locations: 5})
	srv := httptest.NewServer(svc)
	defer srv.Close()
	h := NewProbeHandler(staticLookup(map[string]TargetSettings{"default": keySettings("k-probe")}), nil, nil)
	mfs, err := probeGatherer(t, h, "target="+url.QueryEscape(srv.URL+"/")).Gather()
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, mf := range mfs {
		names = append(names, mf.GetName())
	}
	want := []string{
		"deployment_service_endpoint_duration_seconds",
		"deployment_service_endpoint_status_code",
		"deployment_service_endpoint_up",
		"deployment_service_hold_off_until_timestamp_seconds",
		"deployment_service_location_detail_duration_seconds",
		"deployment_service_location_info",
		"deployment_service_location_last_check_timestamp_seconds",
		"deployment_service_location_up",
		"deployment_service_locations",
		"deployment_service_poll_failures_total",
		"deployment_service_poll_timestamp_seconds",
		"deployment_service_polls_total",
		"deployment_service_projects",
		"deployment_service_request_duration_seconds",
		"deployment_service_request_errors_total",
		"deployment_service_requests_total",
		"deployment_service_scrape_duration_seconds",
		"deployment_service_target_info",
		"deployment_service_up",
	}
	if !slices.Equal(names, want) {
		t.Errorf("families %v,\nwant %v", names, want)
	}
	// The target as normalised (no trailing slash), redacted.
	if err := testutil.GatherAndCompare(probeGatherer(t, h, "target="+url.QueryEscape(srv.URL+"/")), strings.NewReader(`# HELP deployment_service_target_info The deployment service this answer is about, named by its base URL (redacted: no user info, credential-like query values cut out); always 1.
# TYPE deployment_service_target_info gauge
deployment_service_target_info{url="`+srv.URL+`"} 1
`+errorsText(client.ReasonTimeout, 0)), "deployment_service_target_info", "deployment_service_request_errors_total"); err != nil {
		t.Error(err)
	}
	// Lint the answer as Prometheus would read it.
	e := defaultEntry(t, h, mustTarget(t, srv.URL))
	problems, err := testutil.CollectAndLint(e.requests)
	if err != nil || len(problems) > 0 {
		t.Errorf("lint of the request metrics: %v %v", err, problems)
	}
}

// defaultEntry returns the pair of target and the default module, as a
// probe of it would find or build it.
func defaultEntry(t *testing.T, h *ProbeHandler, target *url.URL) *probeEntry {
	t.Helper()
	e, _, _, err := h.pair(target, "")
	if err != nil {
		t.Fatal(err)
	}
	return e
}

func mustTarget(t *testing.T, raw string) *url.URL {
	t.Helper()
	u, err := client.ParseTarget(raw)
	if err != nil {
		t.Fatal(err)
	}
	return u
}

// versionedLookup serves one module, "default", whose version the test
// moves on to mimic a reload that changed it.
type versionedLookup struct {
	mu       sync.Mutex
	settings TargetSettings
	version  int
}

func (l *versionedLookup) lookup(name string) (ProbeModule, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if name != "" && name != "default" {
		return ProbeModule{}, fmt.Errorf("unknown module %q", name)
	}
	return ProbeModule{Settings: l.settings, Version: l.version}, nil
}

func (l *versionedLookup) bump() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.version++
}

// TestProbeCountersRestartWithThePair: the counters of a pair live as
// long as its poller. Evicted from the cache, or replaced because a reload
// changed its module, it starts again from zero (a counter reset, which
// rate() handles).
func TestProbeCountersRestartWithThePair(t *testing.T) {
	svc := sampleservice.New(sampleservice.Options{Key: "k-probe", Locations: 5})
	srv := httptest.NewServer(svc)
	defer srv.Close()
	other := httptest.NewServer(sampleservice.New(sampleservice.Options{Key: "k-probe", Locations: 5}))
	defer other.Close()
	everyEndpoint(svc, sampleservice.Fault{Status: 500})
	l := &versionedLookup{settings: keySettings("k-probe")}
	h := NewProbeHandler(l.lookup, nil, nil)
	leaveRoom(t, h, 1)
	query := "target=" + url.QueryEscape(srv.URL)
	check := func(when string, n int) {
		t.Helper()
		if err := testutil.GatherAndCompare(probeGatherer(t, h, query), strings.NewReader(errorsText(client.ReasonHTTPStatus, n)),
			"deployment_service_request_errors_total"); err != nil {
			t.Errorf("%s: %v", when, err)
		}
	}
	probe(t, h, query)
	check("second probe", 2)
	probe(t, h, "target="+url.QueryEscape(other.URL)) // evicts srv's pair
	check("first probe after eviction", 1)
	l.bump()
	check("first probe after the module changed", 1)
	check("second probe after the module changed", 2)
	l.bump()
	h.Prune()
	check("first probe after a reload pruned the pair", 1)
}

// countedServer serves svc on 127.0.0.1 and counts the connections open
// to it as the server sees them.
type countedServer struct {
	*httptest.Server
	mu           sync.Mutex
	live, opened int
	changed      chan struct{} // closed and replaced on every change
}

func newCountedServer(t *testing.T, svc http.Handler) *countedServer {
	t.Helper()
	s := &countedServer{Server: httptest.NewUnstartedServer(svc), changed: make(chan struct{})}
	s.Config.ConnState = func(_ net.Conn, st http.ConnState) {
		s.mu.Lock()
		defer s.mu.Unlock()
		switch st {
		case http.StateNew:
			s.live++
			s.opened++
		case http.StateClosed, http.StateHijacked:
			s.live--
		default:
			return
		}
		close(s.changed)
		s.changed = make(chan struct{})
	}
	s.Start()
	t.Cleanup(s.Close)
	return s
}

// waitFor waits until the server has live connections open and has
// opened opened in all (-1: any number). A transport that never closes
// them fails the test after a long while.
func (s *countedServer) waitFor(t *testing.T, what string, live, opened int) {
	t.Helper()
	timeout := time.After(10 * time.Second)
	for {
		s.mu.Lock()
		l, o, changed := s.live, s.opened, s.changed
		s.mu.Unlock()
		if l == live && (opened < 0 || o == opened) {
			return
		}
		select {
		case <-changed:
		case <-timeout:
			t.Fatalf("%s: %d connections open, %d opened; want %d open, %d opened", what, l, o, live, opened)
		}
	}
}

func (s *countedServer) counts() (live, opened int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.live, s.opened
}

// TestDroppedPollersCloseTheirConnections: a pair evicted from the cache,
// replaced because a reload changed its module, or pruned after a reload
// closes its connection at once, not after an idle timeout; a pair kept
// keeps one idle connection, whatever its poll needed at once.
func TestDroppedPollersCloseTheirConnections(t *testing.T) {
	svc := sampleservice.New(sampleservice.Options{Key: "k-probe", Locations: 5})
	a, b := newCountedServer(t, svc), newCountedServer(t, svc)
	l := &versionedLookup{settings: keySettings("k-probe")}
	h := NewProbeHandler(l.lookup, nil, nil)
	leaveRoom(t, h, 1)
	probeUp := func(target string) {
		t.Helper()
		if _, body := probe(t, h, "target="+url.QueryEscape(target)); !strings.Contains(body, "\ndeployment_service_up 1\n") {
			t.Fatalf("probe of %s is not up:\n%s", target, body)
		}
	}

	for range 2 {
		probeUp(a.URL)
		a.waitFor(t, "after a probe of a", 1, -1)
	}

	probeUp(b.URL) // evicts a
	a.waitFor(t, "a evicted", 0, -1)
	b.waitFor(t, "after a probe of b", 1, -1)

	_, opened := b.counts()
	l.bump()
	probeUp(b.URL) // replaces b's poller: a new transport, new connections
	if _, o := b.counts(); o == opened {
		t.Fatal("the replaced poller's connection served the new one")
	}
	b.waitFor(t, "b replaced after its module changed", 1, -1)

	l.bump()
	h.Prune()
	b.waitFor(t, "b pruned after its module changed", 0, -1)
}

// TestTargetsOfAModuleShareItsTransport: two targets of one module on one
// origin (path prefixes) keep one idle connection, so the module's transport is
// shared rather than built per target.
func TestTargetsOfAModuleShareItsTransport(t *testing.T) {
	svc := sampleservice.New(sampleservice.Options{Key: "k-probe", Locations: 5})
	mux := http.NewServeMux()
	mux.Handle("/one/", http.StripPrefix("/one", svc))
	mux.Handle("/two/", http.StripPrefix("/two", svc))
	s := newCountedServer(t, mux)
	settings := keySettings("k-probe")
	settings.Client.Concurrency = 1 // one request at a time: one connection suffices
	h := NewProbeHandler(staticLookup(map[string]TargetSettings{"default": settings}), nil, nil)
	for _, target := range []string{s.URL + "/one", s.URL + "/two", s.URL + "/one"} {
		if _, body := probe(t, h, "target="+url.QueryEscape(target)); !strings.Contains(body, "\ndeployment_service_up 1\n") {
			t.Fatalf("probe of %s is not up:\n%s", target, body)
		}
	}
	// The module keeps one idle connection: with a transport per target,
	// each would keep its own.
	s.waitFor(t, "shared by both targets", 1, -1)
}

// errorCount reads one request_errors_total counter.
func (m *RequestMetrics) errorCount(ep client.Endpoint, reason client.Reason) float64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	return float64(m.errors[[2]string{string(ep), string(reason)}])
}
