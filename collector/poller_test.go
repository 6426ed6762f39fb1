package collector

import (
	"context"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/deployment-service/deployment_service_exporter/client"
	"github.com/deployment-service/deployment_service_exporter/sampleservice"
)

// gate holds every request at the door until it is opened, counting the
// requests that arrived and those whose client gave up while held.
type gate struct {
	open      chan struct{}
	once      sync.Once
	arrived   atomic.Int64
	abandoned atomic.Int64
}

func newGate(t *testing.T) *gate {
	g := &gate{open: make(chan struct{})}
	// A test that fails half-way must not leave handlers hanging.
	t.Cleanup(g.release)
	return g
}

func (g *gate) release() { g.once.Do(func() { close(g.open) }) }

func (g *gate) wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		g.arrived.Add(1)
		select {
		case <-g.open:
			next.ServeHTTP(w, r)
		case <-r.Context().Done():
			g.abandoned.Add(1)
		}
	})
}

// waiters returns how many scrapes wait for the poll in flight, -1 when
// there is none.
func (p *Poller) waitersNow() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.inflight == nil {
		return -1
	}
	return p.inflight.waiters
}

// TestJoinedPollRunsToTheLatestDeadline has a scrape with little time start
// a poll and a scrape with much more join it, the API answering only after
// the first scrape's deadline: the second scrape must get the lists, from
// the same single poll.
func TestJoinedPollRunsToTheLatestDeadline(t *testing.T) {
	// The second scrape must join before the first one's deadline, which
	// takes microseconds; a machine too busy for that gets a longer one.
	withMoreTime(t, func(early time.Duration) bool { return joinedPoll(t, early) })
}

// joinedPoll runs the scenario of TestJoinedPollRunsToTheLatestDeadline,
// reporting false when the late scrape came too late to join.
func joinedPoll(t *testing.T, early time.Duration) bool {
	g := newGate(t)
	r := newRig(t, rigOptions{service: sampleservice.Options{Locations: 10, PageSize: 5}, timeout: time.Minute, wrap: g.wrap})

	earlyCtx, cancelEarly := context.WithTimeout(context.Background(), early)
	defer cancelEarly()
	earlyDone := make(chan *Snapshot, 1)
	go func() { earlyDone <- r.poller.Poll(earlyCtx) }()
	waitFor(t, func() bool { return g.arrived.Load() == 3 })

	lateCtx, cancelLate := context.WithTimeout(context.Background(), time.Minute)
	defer cancelLate()
	lateDone := make(chan *Snapshot, 1)
	go func() { lateDone <- r.poller.Poll(lateCtx) }()
	joined := false
	waitFor(t, func() bool {
		joined = joined || r.poller.waitersNow() == 2
		return joined || len(earlyDone) > 0
	})
	if !joined {
		g.release()
		<-lateDone
		return false
	}

	// The early scrape answers at its deadline with what has arrived.
	es := <-earlyDone
	for _, ep := range []client.Endpoint{client.EndpointRoot, client.EndpointProjects, client.EndpointLocations} {
		if st := es.Endpoints[ep]; st.ok() || st.Status != 0 {
			t.Errorf("early scrape: %s up or with status %d before the API answered", ep, st.Status)
		}
	}
	if es.Locations.Known || es.Projects.Known {
		t.Error("early scrape: a count although no list had arrived")
	}

	g.release()
	ls := <-lateDone
	if !ls.up() || !ls.Projects.Known || !ls.Locations.Known || ls.Locations.Value != 10 {
		t.Errorf("late scrape: up %v, projects %+v, locations %+v; the poll ended at the early scrape's deadline", ls.up(), ls.Projects, ls.Locations)
	}
	if n := g.arrived.Load(); n != 3 {
		t.Errorf("the API saw %d requests, want 3: one poll", n)
	}
	if n := r.svc.TotalRequests(); n != 3 {
		t.Errorf("the API answered %d requests, want 3", n)
	}
	return true
}

// TestPollEndsWhenEveryWaiterLeaves checks that a poll extended for a
// later scrape is still cancelled once that scrape leaves too.
func TestPollEndsWhenEveryWaiterLeaves(t *testing.T) {
	g := newGate(t)
	r := newRig(t, rigOptions{service: sampleservice.Options{Locations: 10}, timeout: time.Minute, wrap: g.wrap})
	var wg sync.WaitGroup
	var cancels []context.CancelFunc
	for i, d := range []time.Duration{time.Minute, 2 * time.Minute} {
		ctx, cancel := context.WithTimeout(context.Background(), d)
		cancels = append(cancels, cancel)
		wg.Go(func() { r.poller.Poll(ctx) })
		waitFor(t, func() bool { return r.poller.waitersNow() == i+1 })
	}
	waitFor(t, func() bool { return g.arrived.Load() == 3 })
	for _, cancel := range cancels {
		cancel()
	}
	wg.Wait()
	waitFor(t, func() bool { return g.abandoned.Load() == 3 })
	if r.svc.TotalRequests() != 0 {
		t.Error("requests reached the service after every scrape left")
	}
}

func TestPollNeverOutlastsTheTimeout(t *testing.T) {
	now := time.Now()
	p := NewPoller(&Target{}, PollerOptions{Timeout: time.Second, TimeoutName: "--api.timeout"})
	limit := now.Add(time.Second)
	for _, tt := range []struct {
		name     string
		deadline time.Duration
		header   string
		want     time.Time
		by       string
	}{
		{"shorter", 300 * time.Millisecond, "", now.Add(300 * time.Millisecond), "the scrape's deadline"},
		{"shorter, from the header", 300 * time.Millisecond, "0.35", now.Add(300 * time.Millisecond), "the scrape timeout of 0.35s (X-Prometheus-Scrape-Timeout-Seconds, less a margin to answer)"},
		{"longer", time.Hour, "3600", limit, "--api.timeout=1s"},
		{"none", 0, "", limit, "--api.timeout=1s"},
	} {
		ctx := context.Background()
		if tt.header != "" {
			ctx = WithScrapeTimeout(ctx, tt.header)
		}
		if tt.deadline > 0 {
			var cancel context.CancelFunc
			ctx, cancel = context.WithDeadline(ctx, now.Add(tt.deadline))
			defer cancel()
		}
		got, by := p.horizon(ctx, limit)
		if !got.Equal(tt.want) {
			t.Errorf("%s: horizon %v after the start, want %v", tt.name, got.Sub(now), tt.want.Sub(now))
		}
		if by != tt.by {
			t.Errorf("%s: set by %q, want %q", tt.name, by, tt.by)
		}
	}
}

// TestCompletedPollIsKept has the only scrape leave just after the poll
// gathered all its results, before the poller keeps them (held at the log
// line of its failed detail view): the poll is complete and serves the
// minimum interval.
func TestCompletedPollIsKept(t *testing.T) {
	held := newHeldLog(message("Poll failed"))
	r := newRig(t, rigOptions{service: sampleservice.Options{Locations: 10}, detailIDs: []int64{1}, minInterval: time.Hour, logWrap: held.wrap})
	r.svc.SetFault(sampleservice.EndpointLocationDetail, sampleservice.Fault{Status: http.StatusInternalServerError})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	left := make(chan *Snapshot, 1)
	go func() { left <- r.poller.Poll(ctx) }()
	<-held.held
	r.poller.mu.Lock()
	c := r.poller.inflight
	r.poller.mu.Unlock()
	cancel() // the scrape leaves with every result in
	if s := <-left; !s.up() {
		t.Error("the leaving scrape lacks results that had all arrived")
	}
	close(held.release)
	<-c.done

	sent := r.svc.TotalRequests()
	reg := r.gather(t)
	if n := r.svc.TotalRequests(); n != sent {
		t.Errorf("%d requests inside the minimum interval: the completed poll was thrown away", n-sent)
	}
	compare(t, reg, upHelp+"deployment_service_up 1\n", "deployment_service_up")
}

// TestAbandonedIncompletePollIsDropped is the other side: a poll cut
// short by its scrapes leaving is not kept for the minimum interval.
func TestAbandonedIncompletePollIsDropped(t *testing.T) {
	g := newGate(t)
	r := newRig(t, rigOptions{service: sampleservice.Options{Locations: 10}, minInterval: time.Hour, wrap: g.wrap})
	ctx, cancel := context.WithCancel(context.Background())
	left := make(chan *Snapshot, 1)
	go func() { left <- r.poller.Poll(ctx) }()
	waitFor(t, func() bool { return g.arrived.Load() == 3 })
	r.poller.mu.Lock()
	c := r.poller.inflight
	r.poller.mu.Unlock()
	cancel()
	<-left
	<-c.done
	waitFor(t, func() bool { return g.abandoned.Load() == 3 })
	g.release()
	compare(t, r.gather(t), upHelp+"deployment_service_up 1\n", "deployment_service_up")
	if n := g.arrived.Load(); n != 6 {
		t.Errorf("%d requests, want 6: the abandoned poll was reused", n)
	}
	if n := r.svc.TotalRequests(); n != 3 {
		t.Errorf("%d requests answered, want 3", n)
	}
}
