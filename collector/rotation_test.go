package collector

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/deployment-service/deployment_service_exporter/client"
	"github.com/deployment-service/deployment_service_exporter/sampleservice"
)

// detailOrder returns the ids of the detail views the service got, in the
// order they came, from request number from on.
func detailOrder(svc *sampleservice.Service, from int) []int64 {
	var ids []int64
	for _, rec := range svc.Log()[from:] {
		if rec.Endpoint != sampleservice.EndpointLocationDetail {
			continue
		}
		parts := strings.Split(strings.TrimSuffix(rec.Path, "/"), "/")
		id, _ := strconv.ParseInt(parts[len(parts)-1], 10, 64)
		ids = append(ids, id)
	}
	return ids
}

// pollCutAfter runs one poll whose detail views pass the gate n at a
// time, then ends it at its deadline while the next one is held.
func (r *rig) pollCutAfter(t *testing.T, g *sampleservice.Gate, n int) *Snapshot {
	t.Helper()
	passed := g.Counts().Passed
	polled := make(chan *Snapshot, 1)
	go func() { polled <- r.poller.Poll(context.Background()) }()
	if n > 0 {
		g.Let(n)
	}
	await(t, g, func(c sampleservice.GateCounts) bool { return c.Passed >= passed+n && c.Held == 1 })
	r.expireNow(t)
	s := <-polled
	// The view the deadline cut is gone from the gate before the next
	// poll, or a Let could pass it instead of one of the next poll's.
	await(t, g, func(c sampleservice.GateCounts) bool { return c.Held == 0 })
	return s
}

func ids(details []locationState) []int64 {
	out := make([]int64, len(details))
	for i, d := range details {
		out[i] = d.ID
	}
	return out
}

// TestDetailSubsetInTurns: a subset larger than a poll can check is
// checked in turns, never-checked locations first, then those checked
// longest ago. A location not reached keeps its last result and its time,
// and so does one whose view the deadline cut short sooner than views
// usually take; no location is reported down for want of time.
func TestDetailSubsetInTurns(t *testing.T) {
	r := newRig(t, rigOptions{
		service:   sampleservice.Options{Locations: 10},
		client:    func(c *client.Config) { c.Concurrency = 1 },
		detailIDs: []int64{1, 2, 3, 4, 5, 6},
	})
	// Detail views usually take two seconds here: the one held at the
	// gate when the deadline comes had far less, and is no failure.
	r.poller.book.observe(2 * time.Second)
	g := r.hold(t, sampleservice.EndpointLocationDetail)

	first := r.pollCutAfter(t, g, 2)
	if got := ids(first.Details); !slices.Equal(got, []int64{1, 2}) {
		t.Fatalf("first poll reports locations %v, want [1 2]", got)
	}
	for _, d := range first.Details {
		if d.Err != nil || d.Checked.Before(first.Start) {
			t.Errorf("location %d: err %v, checked %v (poll began %v)", d.ID, d.Err, d.Checked, first.Start)
		}
	}
	if st := first.Endpoints[client.EndpointLocationDetail]; !st.ok() || st.Status != 200 {
		t.Errorf("location_detail %+v, want up with 200: nothing checked failed", st)
	}

	sent := len(r.svc.Log())
	second := r.pollCutAfter(t, g, 3)
	if got := detailOrder(r.svc, sent); !slices.Equal(got, []int64{3, 4, 5, 6}) {
		t.Errorf("second poll checked %v, want the never-checked 3 4 5 first, then 6 (held)", got)
	}
	if got := ids(second.Details); !slices.Equal(got, []int64{1, 2, 3, 4, 5}) {
		t.Errorf("second poll reports %v, want [1 2 3 4 5]", got)
	}
	for _, d := range second.Details {
		if d.Err != nil {
			t.Errorf("location %d down: %v", d.ID, d.Err)
		}
		if fresh := !d.Checked.Before(second.Start); fresh != (d.ID >= 3) {
			t.Errorf("location %d checked %v, poll began %v", d.ID, d.Checked, second.Start)
		}
	}

	sent = len(r.svc.Log())
	r.pollCutAfter(t, g, 3)
	if got := detailOrder(r.svc, sent); !slices.Equal(got, []int64{6, 1, 2, 3}) {
		t.Errorf("third poll checked %v, want 6 (never checked), then 1 and 2 (oldest), then 3", got)
	}
}

// TestSlowDetailIsStillATimeout: a detail view cut short by the deadline
// after the time views usually take is slow on its own: a timeout, and
// its location down.
func TestSlowDetailIsStillATimeout(t *testing.T) {
	r := newRig(t, rigOptions{
		service:   sampleservice.Options{Locations: 10},
		detailIDs: []int64{4},
	})
	// Views usually take a microsecond: the held one has had longer.
	r.poller.book.observe(time.Microsecond)
	g := r.hold(t, sampleservice.EndpointLocationDetail)
	s := r.pollCutAfter(t, g, 0)
	if len(s.Details) != 1 || client.ReasonOf(s.Details[0].Err) != client.ReasonTimeout {
		t.Fatalf("details %+v, want location 4 down with a timeout", s.Details)
	}
	if st := s.Endpoints[client.EndpointLocationDetail]; st.ok() {
		t.Error("location_detail up with a slow view")
	}
}

// TestNoTimeNoStart: a poll with less time left than a detail view
// usually takes starts none, and no view is counted as failed for it;
// when a scrape with more time joins, the views go after all.
func TestNoTimeNoStart(t *testing.T) {
	book := newLocationBook(nil)
	book.observe(4 * time.Second) // views usually take 6 s
	p := newPollRun(context.Background(), &Target{}, book, time.Now(), 30*time.Second)
	p.start = time.Now().Add(-26 * time.Second) // 4 s left of 30
	p.mu.Lock()
	if p.timeForDetail() {
		t.Error("with 4 s left for a 6 s view, the poll would start it")
	}
	p.mu.Unlock()
	p.setBudget(60 * time.Second) // a scrape with 30 s more joins
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.timeForDetail() {
		t.Error("with 34 s left for a 6 s view, the poll would not start it")
	}
}

// TestSlowViewsAreStillTried: views that usually take longer than half a
// poll are still sent at its start, so that a service that became slow,
// then fast again, is checked again, and its slowness shows meanwhile.
func TestSlowViewsAreStillTried(t *testing.T) {
	r := newRig(t, rigOptions{
		service:   sampleservice.Options{Locations: 10},
		detailIDs: []int64{1, 2, 3},
	})
	r.poller.book.observe(time.Hour) // views once took an hour
	sent := len(r.svc.Log())
	s := r.poller.Poll(context.Background())
	if got := detailOrder(r.svc, sent); len(got) != 3 {
		t.Errorf("detail views %v sent, want all three", got)
	}
	for _, d := range s.Details {
		if d.Err != nil || d.Checked.Before(s.Start) {
			t.Errorf("location %d: %v, checked %v: want checked anew in this poll", d.ID, d.Err, d.Checked)
		}
	}
}

// TestJoiningScrapeRestartsTheViews: a scrape with more time that joins
// a poll which had stopped starting views for want of time gets them
// checked; sharing a poll never shortens a scrape's budget.
func TestJoiningScrapeRestartsTheViews(t *testing.T) {
	r := newRig(t, rigOptions{
		service:   sampleservice.Options{Locations: 10},
		client:    func(c *client.Config) { c.Concurrency = 1 },
		detailIDs: []int64{1, 2, 3},
	})
	g := r.hold(t, sampleservice.EndpointRoot)
	short, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	go r.poller.Poll(short)
	await(t, g, func(c sampleservice.GateCounts) bool { return c.Held == 1 })
	run := r.poller.runNow()
	// Views usually take 4.5 s, and the poll believes 9 of its 10 s have
	// gone: no time for one more.
	r.poller.book.observe(3 * time.Second)
	run.mu.Lock()
	run.start = run.start.Add(-9 * time.Second)
	run.mu.Unlock()
	g.Open()
	// The lists are in and the worker has taken no view: it waits for time.
	waitFor(t, func() bool {
		run.mu.Lock()
		defer run.mu.Unlock()
		_, listed := run.lists[client.EndpointLocations]
		return listed && len(run.queue) == 3
	})
	long, cancelLong := context.WithTimeout(context.Background(), time.Minute)
	defer cancelLong()
	s := r.poller.Poll(long)
	if got := ids(s.Details); !slices.Equal(got, []int64{1, 2, 3}) {
		t.Errorf("the joining scrape got locations %v checked, want [1 2 3]", got)
	}
}

// TestSubsetFromTheListForgetsLeavers: locations that leave the subset
// drawn from the list leave the answer, and the book, once the list has
// been read whole; while it cannot be read, the last results stay.
func TestSubsetFromTheListForgetsLeavers(t *testing.T) {
	r := newRig(t, rigOptions{
		service:     sampleservice.Options{Locations: 10, PageSize: 2},
		detailLimit: 4,
	})
	if got := ids(r.poller.Poll(context.Background()).Details); !slices.Equal(got, []int64{1, 2, 3, 4}) {
		t.Fatalf("details %v, want [1 2 3 4]", got)
	}
	r.svc.SetFault(sampleservice.EndpointLocations, sampleservice.Fault{Status: 500})
	if got := ids(r.poller.Poll(context.Background()).Details); !slices.Equal(got, []int64{1, 2, 3, 4}) {
		t.Errorf("with the list down: details %v, want the last results of [1 2 3 4]", got)
	}
	r.svc.ClearFaults()
	r.svc.SetLocations(2)
	if got := ids(r.poller.Poll(context.Background()).Details); !slices.Equal(got, []int64{1, 2}) {
		t.Errorf("after locations 3 and 4 left: details %v, want [1 2]", got)
	}
	if got := r.poller.book.ids(); !slices.Equal(got, []int64{1, 2}) {
		t.Errorf("the book still holds %v", got)
	}
}

// TestPollCounters: one count per poll, however many scrapes share it;
// none for a scrape answered inside the minimum interval; a failed poll
// and a held-off scrape count as failures. Both start at 0.
func TestPollCounters(t *testing.T) {
	r := newRig(t, rigOptions{service: sampleservice.Options{Locations: 5}, minInterval: time.Hour})
	r.poller.opts.Polls = r.requests
	compare(t, r.longLive, pollCounters(0, 0), pollCounterNames...)

	g := r.hold(t, sampleservice.EndpointRoot)
	done := make(chan struct{})
	for range 3 {
		go func() { r.poller.Poll(context.Background()); done <- struct{}{} }()
	}
	await(t, g, func(c sampleservice.GateCounts) bool { return c.Held == 1 })
	waitFor(t, func() bool {
		r.poller.mu.Lock()
		defer r.poller.mu.Unlock()
		return r.poller.inflight != nil && r.poller.inflight.waiters == 3
	})
	g.Open()
	for range 3 {
		<-done
	}
	compare(t, r.longLive, pollCounters(1, 0), pollCounterNames...)

	r.poller.Poll(context.Background()) // inside the minimum interval
	compare(t, r.longLive, pollCounters(1, 0), pollCounterNames...)

	r.poller.opts.MinInterval = 0
	r.svc.SetFault(sampleservice.EndpointProjects, sampleservice.Fault{Status: 429, RetryAfter: "60"})
	r.poller.Poll(context.Background()) // meets the 429
	r.poller.Poll(context.Background()) // held off: sends nothing
	compare(t, r.longLive, pollCounters(3, 2), pollCounterNames...)
	if problems, err := testutil.GatherAndLint(r.longLive, pollCounterNames...); err != nil || len(problems) > 0 {
		t.Errorf("lint: %v %v", problems, err)
	}
}

// TestFinishedPollKeptWhenItsScrapeLeaves: a poll whose last result has
// arrived is finished, even when its only scrape leaves before the poller
// keeps it; the next scrape inside the minimum interval is answered from
// it.
func TestFinishedPollKeptWhenItsScrapeLeaves(t *testing.T) {
	held := newHeldLog(message("Poll failed"))
	r := newRig(t, rigOptions{service: sampleservice.Options{Locations: 5}, detailIDs: []int64{1}, minInterval: time.Hour, logWrap: held.wrap})
	r.svc.SetFault(sampleservice.EndpointLocationDetail, sampleservice.Fault{Status: http.StatusInternalServerError})
	ctx, cancel := context.WithCancel(context.Background())
	polled := make(chan *Snapshot, 1)
	go func() { polled <- r.poller.Poll(ctx) }()
	<-held.held
	r.poller.mu.Lock()
	c := r.poller.inflight
	r.poller.mu.Unlock()
	cancel() // the scrape leaves between the last result and the keeping
	<-polled
	close(held.release)
	<-c.done
	sent := r.svc.TotalRequests()
	if s := r.poller.Poll(context.Background()); !s.up() {
		t.Error("the next scrape is not answered from the finished poll")
	}
	if n := r.svc.TotalRequests(); n != sent {
		t.Errorf("the finished poll was thrown away: %d more requests", n-sent)
	}
}

// deadlineCtx is a scrape's context that the test ends as its deadline
// would, whatever the clock says.
type deadlineCtx struct {
	context.Context
	done chan struct{}
}

func (c deadlineCtx) Done() <-chan struct{} { return c.done }

func (c deadlineCtx) Err() error {
	select {
	case <-c.done:
		return context.DeadlineExceeded
	default:
		return nil
	}
}

// TestPollKeptWhenItsScrapeReachesItsDeadline: a scrape that leaves at its
// deadline does not make the poll abandoned, even when its context ends
// before the poller's own timer: what the deadline cut short is a
// timeout, and the poll is kept.
func TestPollKeptWhenItsScrapeReachesItsDeadline(t *testing.T) {
	r := newRig(t, rigOptions{service: sampleservice.Options{Locations: 5}, detailIDs: []int64{1}, minInterval: time.Hour})
	g := r.hold(t, sampleservice.EndpointLocationDetail)
	ctx := deadlineCtx{Context: context.Background(), done: make(chan struct{})}
	polled := make(chan *Snapshot, 1)
	go func() { polled <- r.poller.Poll(ctx) }()
	await(t, g, func(c sampleservice.GateCounts) bool { return c.Held == 1 })
	// The lists are in before the deadline: only the held view is cut.
	waitFor(t, r.poller.listsRecorded)
	r.poller.mu.Lock()
	c := r.poller.inflight
	r.poller.mu.Unlock()
	close(ctx.done)
	<-polled
	<-c.done
	g.Open()
	sent := r.svc.TotalRequests()
	r.poller.Poll(context.Background())
	if n := r.svc.TotalRequests(); n != sent {
		t.Errorf("the poll cut by its deadline was thrown away: %d more requests", n-sent)
	}
}

// TestOlderPollNeverReplacesNewer: a poll that ends after a newer one has
// been kept leaves the newer one's result as the last.
func TestOlderPollNeverReplacesNewer(t *testing.T) {
	r := newRig(t, rigOptions{service: sampleservice.Options{Locations: 5}})
	older, newer := r.poller.Poll(context.Background()), r.poller.Poll(context.Background())
	r.poller.finish(finished(4), newer)
	r.poller.finish(finished(3), older)
	r.poller.mu.Lock()
	last := r.poller.last
	r.poller.mu.Unlock()
	if !last.Start.Equal(newer.Start) {
		t.Errorf("the last result is the poll of %v, want the newer one of %v", last.Start, newer.Start)
	}
}

// finished is a poll numbered seq whose every result has arrived.
func finished(seq uint64) *pollRun {
	p := newPollRun(context.Background(), &Target{}, newLocationBook(nil), time.Now(), time.Second)
	p.seq, p.done = seq, make(chan struct{})
	p.cancel(nil)
	return p
}

// TestReloadKeepsLocationChecks: a reload that changes a /probe pair's
// module keeps the last checks of the locations still in its subset and
// forgets the others, and those of a module whose info fields changed.
func TestReloadKeepsLocationChecks(t *testing.T) {
	svc := sampleservice.New(sampleservice.Options{Key: "k-probe", Locations: 5})
	srv := httptest.NewServer(svc)
	defer srv.Close()
	settings := keySettings("k-probe")
	settings.DetailIDs, settings.InfoFields = []int64{1, 2}, []string{"name"}
	l := &versionedLookup{settings: settings}
	h := NewProbeHandler(l.lookup, nil, nil)
	target := mustTarget(t, srv.URL)
	if code, _ := probe(t, h, "target="+url.QueryEscape(srv.URL)); code != 200 {
		t.Fatalf("probe: %d", code)
	}
	before := defaultEntry(t, h, target).poller.book.lastChecked(2)

	reload := func(ids []int64, fields []string) *Poller {
		l.mu.Lock()
		l.settings.DetailIDs, l.settings.InfoFields = ids, fields
		l.version++
		l.mu.Unlock()
		h.Prune()
		return defaultEntry(t, h, target).poller
	}
	p := reload([]int64{2, 3}, []string{"name"})
	if got := p.book.ids(); !slices.Equal(got, []int64{2}) {
		t.Errorf("after the subset became [2 3]: the book holds %v, want [2]", got)
	}
	if got := p.book.lastChecked(2); !got.Equal(before) {
		t.Errorf("location 2 last checked %v, want %v from before the reload", got, before)
	}
	if p = reload([]int64{2, 3}, []string{"region"}); len(p.book.ids()) != 0 {
		t.Errorf("after the info fields changed the book holds %v", p.book.ids())
	}
}

// TestSubsetWhileTheListIsRead: before the list is read whole, the subset
// is the locations checked before and those the list has given so far,
// each once.
func TestSubsetWhileTheListIsRead(t *testing.T) {
	book := newLocationBook(nil)
	for _, id := range []int64{1, 3, 5} {
		book.record(locationState{ID: id, Checked: time.Unix(1700000000, 0)})
	}
	p := newPollRun(context.Background(), &Target{DetailLimit: 10}, book, time.Now(), time.Second)
	p.subset = []int64{2, 3, 6, 1, 4}
	got := p.subsetIDs()
	slices.Sort(got)
	if !slices.Equal(got, []int64{1, 2, 3, 4, 5, 6}) {
		t.Errorf("subset %v, want each of 1 to 6 once", got)
	}
}
