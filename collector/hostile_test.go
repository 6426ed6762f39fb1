package collector

import (
	"context"
	"errors"
	"fmt"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/prometheus/common/config"

	"github.com/deployment-service/deployment_service_exporter/client"
	"github.com/deployment-service/deployment_service_exporter/sampleservice"
)

// pollCounters is the exposition of polls_total and poll_failures_total.
func pollCounters(polls, failures int) string {
	return fmt.Sprintf(`# HELP deployment_service_poll_failures_total Polls after which deployment_service_up was 0, held-off ones included.
# TYPE deployment_service_poll_failures_total counter
deployment_service_poll_failures_total %d
# HELP deployment_service_polls_total Polls of the deployment service: one per poll, however many scrapes shared it, held-off ones included.
# TYPE deployment_service_polls_total counter
deployment_service_polls_total %d
`, failures, polls)
}

var pollCounterNames = []string{"deployment_service_polls_total", "deployment_service_poll_failures_total"}

// TestHoldOffOutlivesEviction: a pair pushed out of the /probe cache by
// junk probes keeps its hold-off: probed again, it sends the service that
// asked to wait nothing, and reports the hold-off.
func TestHoldOffOutlivesEviction(t *testing.T) {
	svc := sampleservice.New(sampleservice.Options{Key: "k-held", Locations: 3})
	srv := httptest.NewServer(svc)
	defer srv.Close()
	svc.SetFault(sampleservice.EndpointRoot, sampleservice.Fault{Status: 429, RetryAfter: "3600"})
	h := NewProbeHandler(staticLookup(map[string]TargetSettings{"default": keySettings("k-held")}), nil, nil)
	leaveRoom(t, h, 2)
	held := "target=" + url.QueryEscape(srv.URL)
	probe(t, h, held)
	sent := svc.TotalRequests()

	junk := closedURL(t)
	for i := range 4 {
		probe(t, h, "target="+url.QueryEscape(fmt.Sprintf("%s/junk%d", junk, i)))
	}
	h.mu.Lock()
	_, kept := h.pollers[targetKey{target: mustTarget(t, srv.URL).String(), module: "default"}]
	h.mu.Unlock()
	if kept {
		t.Fatal("the junk probes did not evict the held-off pair")
	}

	for _, target := range []string{srv.URL, srv.URL + "/another/prefix"} {
		_, body := probe(t, h, "target="+url.QueryEscape(target))
		if !strings.Contains(body, `deployment_service_endpoint_status_code{endpoint="root"} 429`) ||
			strings.Contains(body, "deployment_service_hold_off_until_timestamp_seconds 0\n") {
			t.Errorf("probe of %s after eviction does not report the hold-off:\n%s", target, body)
		}
	}
	if n := svc.TotalRequests(); n != sent {
		t.Errorf("%d requests sent to the service during its hold-off", n-sent)
	}
}

// TestCallerCutPollsAreNoFailures: scrapes whose timeout leaves no time to
// poll, or that hang up at once, add no poll failure against a healthy
// service (one that a busy machine lets finish in time counts as a poll
// that went well); a scrape with time counts its poll.
func TestCallerCutPollsAreNoFailures(t *testing.T) {
	r := newRig(t, rigOptions{service: sampleservice.Options{Locations: 5}, detailIDs: []int64{1}})
	recent := NewPollLog(100)
	r.poller.opts.Polls, r.poller.opts.Recent = r.requests, recent
	for range 10 {
		r.scrape(t, "0.000001")
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	r.poller.Poll(ctx)
	// Every poll is recorded once it has been counted, or not.
	waitFor(t, func() bool { r := recent.Recent(); return len(r) == 1 && r[0].ID == 11 })
	if _, n := pollTotals(r.requests.pollCounts); n != 0 {
		t.Errorf("%v poll failures from scrapes that left no time to poll", n)
	}

	polls, _ := pollTotals(r.requests.pollCounts)
	r.scrape(t, "")
	if n, _ := pollTotals(r.requests.pollCounts); n != polls+1 {
		t.Errorf("a scrape with time added %v polls, want 1", n-polls)
	}
}

// TestHeldOffScrapesSharePolls: during a hold-off, concurrent scrapes
// share one held-off poll, and scrapes inside the minimum interval are
// answered from the last poll, as at any other time.
func TestHeldOffScrapesSharePolls(t *testing.T) {
	for _, tt := range []struct {
		name        string
		minInterval time.Duration
		polls       int
	}{
		{"concurrent scrapes", 0, 2},
		{"inside the minimum interval", time.Hour, 1},
	} {
		t.Run(tt.name, func(t *testing.T) {
			r := newRig(t, rigOptions{service: sampleservice.Options{Locations: 5}, minInterval: tt.minInterval})
			r.poller.opts.Polls = r.requests
			r.svc.SetFault(sampleservice.EndpointRoot, sampleservice.Fault{Status: 429, RetryAfter: "3600"})
			r.gather(t) // meets the 429
			sent := r.svc.TotalRequests()
			var wg sync.WaitGroup
			for range 8 {
				wg.Go(func() {
					if body := r.scrape(t, ""); !strings.Contains(body, `deployment_service_endpoint_status_code{endpoint="root"} 429`) {
						t.Errorf("a scrape during the hold-off does not report it:\n%s", body)
					}
				})
			}
			wg.Wait()
			compare(t, r.longLive, pollCounters(tt.polls, tt.polls), pollCounterNames...)
			if n := r.svc.TotalRequests(); n != sent {
				t.Errorf("%d requests sent during the hold-off", n-sent)
			}
		})
	}
}

// TestReloadCancelsADroppedPairsPoll: once a reload no longer allows a
// pair, its poll in flight sends nothing more, counts no failure, and a
// scrape that took the pair before the reload polls nothing with it.
func TestReloadCancelsADroppedPairsPoll(t *testing.T) {
	for _, tt := range []struct {
		name   string
		reload func(*versionedLookup)
	}{
		{"credentials changed", revokeKey},
		{"module gone", func(l *versionedLookup) { l.gone = true }},
		{"target no longer listed", func(l *versionedLookup) { l.check = func(*url.URL) error { return errors.New("not listed") } }},
	} {
		t.Run(tt.name, func(t *testing.T) {
			svc := sampleservice.New(sampleservice.Options{Key: "k-probe", Locations: 5})
			srv := httptest.NewServer(svc)
			defer srv.Close()
			settings := keySettings("k-probe")
			settings.Client.Concurrency = 1
			settings.DetailIDs = []int64{1, 2, 3, 4}
			l := &versionedLookup{settings: settings}
			h := NewProbeHandler(l.lookup, nil, nil)
			g := svc.Hold()
			t.Cleanup(g.Open)
			query := "target=" + url.QueryEscape(srv.URL)
			done := make(chan struct{})
			go func() {
				defer close(done)
				probe(t, h, query)
			}()
			await(t, g, func(c sampleservice.GateCounts) bool { return c.Held == 1 })
			e := defaultEntry(t, h, mustTarget(t, srv.URL))
			l.change(tt.reload)
			h.Prune()
			g.Open()
			<-done
			if n := svc.TotalRequests(); n != 1 {
				t.Errorf("the dropped pair's poll sent %d requests after the one in flight", n-1)
			}
			s := e.poller.Poll(context.Background())
			if n := svc.TotalRequests(); n != 1 || s.up() {
				t.Errorf("the dropped pair polled again: %d requests, up %v", n-1, s.up())
			}
			if polls, _ := pollTotals(e.polls); polls != 0 {
				t.Errorf("the cancelled poll was counted: %v polls", polls)
			}
		})
	}
}

// TestHoldOffMidPollReportsNothingUnsent: when a hold-off begins during a
// poll, every endpoint whose request was not sent is down with the
// hold-off's status, location_detail included.
func TestHoldOffMidPollReportsNothingUnsent(t *testing.T) {
	r := newRig(t, rigOptions{
		service:   sampleservice.Options{Locations: 5},
		detailIDs: []int64{1, 2},
		client:    func(c *client.Config) { c.Concurrency = 1 },
	})
	r.svc.SetFault(sampleservice.EndpointRoot, sampleservice.Fault{Status: 429, RetryAfter: "3600"})
	s := r.poller.Poll(context.Background())
	if n := r.svc.Requests(sampleservice.EndpointLocationDetail); n != 0 {
		t.Fatalf("%d detail views sent: the lists did not go first", n)
	}
	for ep, st := range s.Endpoints {
		sent := r.svc.Requests(string(ep)) > 0
		if !sent && (st.ok() || st.Status != 429) {
			t.Errorf("%s was not sent, yet reports up %v with status %d", ep, st.ok(), st.Status)
		}
	}
	if _, ok := s.Endpoints[client.EndpointLocationDetail]; !ok {
		t.Error("location_detail is not reported")
	}
}

// TestUncheckedDetailsAreDown: a poll that checked no detail view, its
// location list having failed, reports location_detail down with no
// status, while the locations keep their last results.
func TestUncheckedDetailsAreDown(t *testing.T) {
	r := newRig(t, rigOptions{service: sampleservice.Options{Locations: 5}, detailLimit: 2})
	r.poller.Poll(context.Background())
	r.svc.SetFault(sampleservice.EndpointLocations, sampleservice.Fault{Status: 500})
	s := r.poller.Poll(context.Background())
	if st, ok := s.Endpoints[client.EndpointLocationDetail]; !ok || st.ok() || st.Status != 0 {
		t.Errorf("location_detail reported %v (up %v, status %d), want down with status 0", ok, st.ok(), st.Status)
	}
	if got := ids(s.Details); len(got) != 2 || s.Details[0].Err != nil || s.Details[1].Err != nil {
		t.Errorf("the locations lost their last results: %v", got)
	}
}

// TestHeldOffPollLastsASecond: a held-off poll that a scrape with no time
// to spare started stays in flight for a second, shared by the scrapes
// that come meanwhile, so that such scrapes cannot count a failure each.
func TestHeldOffPollLastsASecond(t *testing.T) {
	r := newRig(t, rigOptions{service: sampleservice.Options{Locations: 5}})
	r.svc.SetFault(sampleservice.EndpointRoot, sampleservice.Fault{Status: 429, RetryAfter: "3600"})
	// Met in real time, the hold-off is in force for the whole of the
	// bubble's clock, which starts in 2000.
	r.gather(t)
	synctest.Test(t, func(t *testing.T) {
		m := newPollCounts(prometheus.NewRegistry())
		p := NewPoller(r.target, PollerOptions{Timeout: time.Minute, Polls: m})
		tiny := func() {
			ctx, cancel := context.WithTimeout(context.Background(), time.Microsecond)
			defer cancel()
			if s := p.Poll(ctx); s.HoldOffUntil.IsZero() {
				t.Error("a scrape during the hold-off does not report it")
			}
		}
		tiny()
		time.Sleep(900 * time.Millisecond)
		tiny()
		if got, _ := pollTotals(m); got != 1 {
			t.Errorf("two scrapes within a second counted %v held-off polls, want 1", got)
		}
		time.Sleep(200 * time.Millisecond)
		tiny()
		if _, got := pollTotals(m); got != 2 {
			t.Errorf("a scrape a second later counted %v failed polls in all, want 2", got)
		}
	})
}

// TestReloadIsNoLocationsFailure: a detail view that a reload cancels
// (the module's credentials changed) leaves its location's last result.
func TestReloadIsNoLocationsFailure(t *testing.T) {
	svc := sampleservice.New(sampleservice.Options{Key: "k-probe", Locations: 5})
	srv := httptest.NewServer(svc)
	defer srv.Close()
	l := &versionedLookup{settings: keySettings("k-probe")}
	h := NewProbeHandler(l.lookup, nil, nil)
	query := "target=" + url.QueryEscape(srv.URL)
	probe(t, h, query) // the detail view's usual time is known from now on
	e := defaultEntry(t, h, mustTarget(t, srv.URL))
	g := svc.Hold(sampleservice.EndpointLocationDetail)
	t.Cleanup(g.Open)
	done := make(chan struct{})
	go func() {
		defer close(done)
		probe(t, h, query)
	}()
	await(t, g, func(c sampleservice.GateCounts) bool { return c.Held == 1 })
	// Held well past its usual time, the view would be slow on its own if
	// its poll ended at a deadline.
	time.Sleep(50 * time.Millisecond)
	l.change(func(l *versionedLookup) {
		l.settings.Client.HTTPClientConfig.HTTPHeaders = &config.Headers{Headers: map[string]config.Header{"X-Team": {Secrets: []config.Secret{"blue"}}}}
	})
	h.Prune()
	<-done
	if d := e.poller.keptLocations().view([]int64{1}); len(d) != 1 || d[0].Err != nil {
		t.Errorf("the cancelled view changed its location's last check: %+v", d)
	}
}

// pollTotals reads c's poll counters.
func pollTotals(c pollCounts) (polls, failures float64) {
	return testutil.ToFloat64(c.polls), testutil.ToFloat64(c.failures)
}
