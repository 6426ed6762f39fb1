package collector

import (
	"cmp"
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

// TestEndpointFailureInfo: /metrics and /probe answer why each down
// endpoint is down, with the same reason and cause; the last of the
// scrapes is compared.
func TestEndpointFailureInfo(t *testing.T) {
	const help = `# HELP deployment_service_endpoint_failure_info Why the endpoint was down in this scrape: the failure reason (or held_off, not_checked) and, for network failures and timeouts, their cause; always 1.
# TYPE deployment_service_endpoint_failure_info gauge
`
	every := func(reason, cause string, eps ...client.Endpoint) string {
		var b strings.Builder
		for _, ep := range eps {
			if cause != "" {
				fmt.Fprintf(&b, "deployment_service_endpoint_failure_info{cause=%q,endpoint=%q,reason=%q} 1\n", cause, ep, reason)
			} else {
				fmt.Fprintf(&b, "deployment_service_endpoint_failure_info{endpoint=%q,reason=%q} 1\n", ep, reason)
			}
		}
		return b.String()
	}
	lists := []client.Endpoint{client.EndpointLocations, client.EndpointProjects, client.EndpointRoot}
	all := append([]client.Endpoint{client.EndpointLocationDetail}, lists...)
	tests := []struct {
		name        string
		fault       map[string]sampleservice.Fault
		down        bool // the service's port is closed
		detailLimit int  // else the subset is location 1, or none with noSubset
		noSubset    bool
		timeout     time.Duration
		scrapes     int
		want        string
	}{
		{name: "healthy", want: ""},
		{name: "500", fault: map[string]sampleservice.Fault{"*": {Status: 500}}, want: every("http_status", "", all...)},
		{name: "refused", down: true, want: every("network", client.CauseConnectionRefused, all...)},
		{name: "timeout", fault: map[string]sampleservice.Fault{"*": {Delay: time.Hour}}, noSubset: true,
			timeout: 300 * time.Millisecond, want: every("timeout", client.CauseTimeout, lists...)},
		{name: "held off", fault: map[string]sampleservice.Fault{"*": {Status: 429, RetryAfter: "3600"}}, scrapes: 2,
			want: every("held_off", "", all...)},
		{name: "details not checked", fault: map[string]sampleservice.Fault{sampleservice.EndpointLocations: {Status: 500}},
			detailLimit: 2, want: every("not_checked", "", client.EndpointLocationDetail) + every("http_status", "", client.EndpointLocations)},
	}
	for _, tt := range tests {
		ids := []int64{1}
		if tt.noSubset || tt.detailLimit > 0 {
			ids = nil
		}
		r := newRig(t, rigOptions{service: sampleservice.Options{Locations: 5}, detailIDs: ids, detailLimit: tt.detailLimit, timeout: tt.timeout})
		for ep, f := range tt.fault {
			if ep == "*" {
				everyEndpoint(r.svc, f)
			} else {
				r.svc.SetFault(ep, f)
			}
		}
		if tt.down {
			r.srv.Close()
		}
		s := keySettings(r.svc.Key())
		s.DetailIDs, s.DetailLimit, s.InfoFields = ids, tt.detailLimit, nil
		s.Timeout = cmp.Or(tt.timeout, 30*time.Second)
		paths := map[string]http.Handler{"metrics": r.handler, "probe": NewProbeHandler(staticLookup(map[string]TargetSettings{"default": s}), nil, nil)}
		for name, h := range paths {
			t.Run(tt.name+"/"+name, func(t *testing.T) {
				query := "target=" + url.QueryEscape(r.srv.URL+r.svc.Prefix())
				for range max(tt.scrapes, 1) - 1 {
					probe(t, h, query)
				}
				want := tt.want
				if want != "" {
					want = help + want
				}
				if err := testutil.GatherAndCompare(probeGatherer(t, h, query), strings.NewReader(want),
					"deployment_service_endpoint_failure_info"); err != nil {
					t.Error(err)
				}
			})
		}
	}
}

// TestProbeAnswersEveryFamily: a probe answers the per-scrape families, the
// poll counters and target_info: no request families, nothing exporter-internal.
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
		"deployment_service_scrape_duration_seconds",
		"deployment_service_target_info",
		"deployment_service_up",
	}
	if !slices.Equal(names, want) {
		t.Errorf("families %v,\nwant %v", names, want)
	}
	// The target as normalised (no trailing slash), redacted.
	if err := testutil.GatherAndCompare(probeGatherer(t, h, "target="+url.QueryEscape(srv.URL+"/")), strings.NewReader(`# HELP deployment_service_target_info The deployment service this answer is about, named by its base URL (redacted: no user info, credential-like query values cut out), with the exporter's page about it if known; always 1.
# TYPE deployment_service_target_info gauge
deployment_service_target_info{url="`+srv.URL+`"} 1
`), "deployment_service_target_info"); err != nil {
		t.Error(err)
	}
	// Lint the answer as Prometheus would read it.
	problems, err := testutil.GatherAndLint(probeGatherer(t, h, "target="+url.QueryEscape(srv.URL)))
	if err != nil || len(problems) > 0 {
		t.Errorf("lint of the answer: %v %v", err, problems)
	}
}

// defaultEntry returns the pair of target and the default module, as a
// probe of it would find or build it.
func defaultEntry(t *testing.T, h *ProbeHandler, target *url.URL) *probeEntry {
	t.Helper()
	e, _, _, err := h.pair(target.String(), "")
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

// versionedLookup serves one module, "default", which the test changes
// to mimic a reload: its settings, the targets it allows, or its removal.
type versionedLookup struct {
	mu       sync.Mutex
	settings TargetSettings
	version  int
	gone     bool
	check    func(*url.URL) error
}

func (l *versionedLookup) lookup(name string) (ProbeModule, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.gone || name != "" && name != "default" {
		return ProbeModule{}, fmt.Errorf("unknown module %q", name)
	}
	return ProbeModule{Settings: l.settings, Version: l.version, CheckTarget: l.check}, nil
}

// change applies f to the module, as a reload of a changed file does.
func (l *versionedLookup) change(f func(*versionedLookup)) {
	l.mu.Lock()
	defer l.mu.Unlock()
	f(l)
	l.version++
}

// TestProbeCountersLiveWithThePair: the poll counters of a pair last while
// the cache keeps it, through reloads that change its module's timeout. Evicted,
// or dropped because its credentials changed, it starts again from zero
// (a counter reset, which rate() handles).
func TestProbeCountersLiveWithThePair(t *testing.T) {
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
		if err := testutil.GatherAndCompare(probeGatherer(t, h, query), strings.NewReader(pollCounters(n, n)), pollCounterNames...); err != nil {
			t.Errorf("%s: %v", when, err)
		}
	}
	probe(t, h, query)
	check("second probe", 2)
	probe(t, h, "target="+url.QueryEscape(other.URL)) // evicts srv's pair
	check("first probe after eviction", 1)
	l.change(func(l *versionedLookup) { l.settings.Timeout = 4 * time.Second })
	check("first probe after the timeout changed", 2)
	l.change(func(l *versionedLookup) { l.settings.Timeout = 3 * time.Second })
	h.Prune()
	check("first probe after a reload changed the timeout", 3)
	l.change(revokeKey)
	h.Prune()
	check("first probe after a reload changed the credentials", 1)
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

// TestProbePairsKeepNoConnection: a /probe pair closes its connections when
// its poll ends, as blackbox_exporter does, but reuses them within the poll.
func TestProbePairsKeepNoConnection(t *testing.T) {
	for _, tt := range []struct {
		name        string
		concurrency int
		opened      int // a poll's connections; -1: any number
	}{
		{"one request at a time reuses one connection", 1, 1},
		{"four requests at a time", 4, -1},
	} {
		t.Run(tt.name, func(t *testing.T) {
			svc := sampleservice.New(sampleservice.Options{Key: "k-probe", Locations: 5})
			s := newCountedServer(t, svc)
			settings := keySettings("k-probe")
			settings.Client.Concurrency, settings.DetailIDs = tt.concurrency, []int64{1, 2, 3, 4, 5}
			h := NewProbeHandler(staticLookup(map[string]TargetSettings{"default": settings}), nil, nil)
			for i, target := range []string{s.URL + "/", s.URL, s.URL + "/"} {
				if _, body := probe(t, h, "target="+url.QueryEscape(target)); !strings.Contains(body, "\ndeployment_service_up 1\n") {
					t.Fatalf("probe %d is not up:\n%s", i+1, body)
				}
				opened := -1
				if tt.opened >= 0 {
					opened = (i + 1) * tt.opened
				}
				s.waitFor(t, fmt.Sprintf("after probe %d", i+1), 0, opened)
			}
			if n := svc.TotalRequests(); n != 3*8 {
				t.Errorf("the service saw %d requests, want 24: 8 a poll", n)
			}
		})
	}
}

// errorCount reads one request_errors_total counter.
func (m *RequestMetrics) errorCount(ep client.Endpoint, reason client.Reason) float64 {
	return testutil.ToFloat64(m.errors.WithLabelValues(string(ep), string(reason)))
}

// revokeKey gives the module another key, which revokes its pairs.
func revokeKey(l *versionedLookup) { l.settings.Client = keySettings("k-other").Client }

// acceptHeaders are the Accept headers Prometheus sends: 3.x (both name
// escapings), 2.49 and later, 2.23 to 2.48, and with native histograms.
var acceptHeaders = map[string]string{
	"Prometheus 3":           "application/openmetrics-text;version=1.0.0;escaping=underscores;q=0.5,application/openmetrics-text;version=0.0.1;q=0.4,text/plain;version=1.0.0;escaping=underscores;q=0.3,text/plain;version=0.0.4;q=0.2,*/*;q=0.1",
	"Prometheus 3, UTF-8":    "application/openmetrics-text;version=1.0.0;escaping=allow-utf-8;q=0.5,application/openmetrics-text;version=0.0.1;q=0.4,text/plain;version=1.0.0;escaping=allow-utf-8;q=0.3,text/plain;version=0.0.4;q=0.2,*/*;q=0.1",
	"Prometheus 2.49":        "application/openmetrics-text;version=1.0.0;q=0.4,application/openmetrics-text;version=0.0.1;q=0.3,text/plain;version=0.0.4;q=0.2,*/*;q=0.1",
	"Prometheus 2.23":        "application/openmetrics-text;version=1.0.0,application/openmetrics-text;version=0.0.1;q=0.75,text/plain;version=0.0.4;q=0.5,*/*;q=0.1",
	"native histograms":      "application/vnd.google.protobuf;proto=io.prometheus.client.MetricFamily;encoding=delimited;q=0.5,application/openmetrics-text;version=1.0.0;q=0.4,application/openmetrics-text;version=0.0.1;q=0.3,text/plain;version=0.0.4;q=0.2,*/*;q=0.1",
	"no Accept (curl, a UI)": "",
}

// scrapeAs answers one scrape of h as Prometheus with accept would make it:
// its sample lines (each protobuf metric as one line of its family's name).
func scrapeAs(t *testing.T, h http.Handler, query, accept string) []string {
	t.Helper()
	req := httptest.NewRequest(http.MethodGet, "/probe?"+query, nil)
	req.Header.Set("Accept", accept)
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	var samples []string
	if strings.HasPrefix(rec.Header().Get("Content-Type"), "application/vnd.google.protobuf") {
		dec := expfmt.NewDecoder(rec.Body, expfmt.ResponseFormat(rec.Header()))
		for mf := new(dto.MetricFamily); dec.Decode(mf) == nil; mf = new(dto.MetricFamily) {
			for range mf.GetMetric() {
				samples = append(samples, mf.GetName())
			}
		}
		return samples
	}
	for line := range strings.Lines(rec.Body.String()) {
		if line != "\n" && !strings.HasPrefix(line, "#") {
			samples = append(samples, line)
		}
	}
	return samples
}

// TestSamplesPerScrape: a /probe answer, in every format Prometheus asks
// for, holds at most 30 samples and 4 more per location of the subset,
// healthy or failing, with neither request families nor _created samples;
// /metrics carries the request families, without _created either.
func TestSamplesPerScrape(t *testing.T) {
	for _, subset := range []int{0, 5} {
		r := newRig(t, rigOptions{service: sampleservice.Options{Locations: 8}, detailLimit: subset, infoFields: []string{"name"}})
		s := keySettings(r.svc.Key())
		s.DetailIDs, s.DetailLimit, s.InfoFields = nil, subset, []string{"name"}
		h := NewProbeHandler(staticLookup(map[string]TargetSettings{"default": s}), nil, nil)
		query := "target=" + url.QueryEscape(r.srv.URL+r.svc.Prefix())
		limit := 30 + 4*subset
		for _, state := range []string{"healthy", "failing"} {
			if state == "failing" {
				everyEndpoint(r.svc, sampleservice.Fault{Status: 500})
			}
			for who, accept := range acceptHeaders {
				t.Run(fmt.Sprintf("subset %d/%s/%s", subset, state, who), func(t *testing.T) {
					samples := scrapeAs(t, h, query, accept)
					t.Logf("/probe: %d samples", len(samples))
					if len(samples) > limit || len(samples) < 10 {
						t.Errorf("/probe answered %d samples, want at most %d:\n%s", len(samples), limit, strings.Join(samples, ""))
					}
					all := strings.Join(samples, "")
					if strings.Contains(all, "_created") || strings.Contains(all, "deployment_service_request") {
						t.Errorf("/probe answered _created or request samples:\n%s", all)
					}
					all = strings.Join(scrapeAs(t, r.handler, "", accept), "")
					for _, family := range []string{"deployment_service_requests_total", "deployment_service_request_errors_total", "deployment_service_request_duration_seconds"} {
						if !strings.Contains(all, family) {
							t.Errorf("/metrics lacks %s", family)
						}
					}
					if strings.Contains(all, "_created") {
						t.Errorf("/metrics answered _created samples:\n%s", all)
					}
				})
			}
		}
	}
}

// TestReloadKeepsPollsInFlight: 50 reloads that alternate the module's
// timeout, amid 200 probes whose polls are all in flight, fail none of them.
func TestReloadKeepsPollsInFlight(t *testing.T) {
	svc := sampleservice.New(sampleservice.Options{Key: "k-probe", Locations: 5})
	srv := httptest.NewServer(svc)
	defer srv.Close()
	g := svc.Hold(sampleservice.EndpointRoot)
	t.Cleanup(g.Open)
	l := &versionedLookup{settings: keySettings("k-probe")}
	h := NewProbeHandler(l.lookup, nil, nil)
	query := "target=" + url.QueryEscape(srv.URL)
	var wg sync.WaitGroup
	var mu sync.Mutex
	down := 0
	for i := range 50 {
		for range 4 {
			wg.Go(func() {
				if _, body := probe(t, h, query); !strings.Contains(body, "\ndeployment_service_up 1\n") {
					mu.Lock()
					down++
					mu.Unlock()
				}
			})
		}
		// A poll of this round's module is in flight before the reload.
		await(t, g, func(c sampleservice.GateCounts) bool { return c.Arrived > i })
		l.change(func(l *versionedLookup) { l.settings.Timeout = time.Duration(10-i%2) * time.Second })
		h.Prune()
	}
	g.Open()
	wg.Wait()
	if down > 0 {
		t.Errorf("%d of 200 probes answered up 0 across reloads that changed only a timeout", down)
	}
}
