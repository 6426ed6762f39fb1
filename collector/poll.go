package collector

import (
	"cmp"
	"context"
	"errors"
	"net/http"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/deployment-service/deployment_service_exporter/client"
)

// Target is one watched service and what to read from it.
type Target struct {
	Client      *client.Client
	DetailIDs   []int64 // the detail subset; without them, the list's first DetailLimit
	DetailLimit int
	InfoFields  []string // detail view fields exposed as info labels
}

func (t *Target) wantsDetails() bool { return len(t.DetailIDs) > 0 || t.DetailLimit > 0 }

// idsFromList is how many ids of the location list make the detail subset.
func (t *Target) idsFromList() int {
	if len(t.DetailIDs) > 0 {
		return 0
	}
	return t.DetailLimit
}

// pollRun is one poll of the API. Its results gather as requests finish,
// so a scrape that cannot wait any longer can take what has arrived.
type pollRun struct {
	ctx    context.Context
	cancel context.CancelCauseFunc
	t      *Target
	book   *locationBook
	start  time.Time
	trace  *client.Trace
	allIn  chan struct{} // closed when active falls to 0
	done   chan struct{} // closed once the Poller has kept snap

	// Guarded by the Poller's mu: its scrapes and the latest of their deadlines.
	seq     uint64
	snap    *Snapshot
	waiters int
	horizon time.Time

	mu                sync.Mutex
	wake              *sync.Cond // the queue or the budget changed, or the poll ended
	budget            time.Duration
	lists             map[client.Endpoint]client.ListResult // root and the lists that are in
	subset            []int64                               // detail ids met in this poll, in order
	seen              map[int64]bool
	queue             []queuedDetail // the views yet to start, the location checked longest ago first
	closed            bool           // no more ids will join the queue
	detail            detailSummary
	listsOut, workers int
	active            int // calls whose results are out
}

type queuedDetail struct {
	id   int64
	last time.Time
}

// detailSummary sums up the detail views as the location_detail endpoint.
type detailSummary struct {
	firstStart, lastEnd time.Time
	failedStatus        int   // the highest status of the failed views
	err                 error // the first failure, nil when none failed
}

func (d *detailSummary) add(start, end time.Time, status int, err error) {
	if d.firstStart.IsZero() || start.Before(d.firstStart) {
		d.firstStart = start
	}
	d.lastEnd = maxTime(d.lastEnd, end)
	if err != nil {
		d.fail(status, err)
	}
}

func (d *detailSummary) fail(status int, err error) {
	d.failedStatus = max(d.failedStatus, status)
	if d.err == nil {
		d.err = err
	}
}

func (d *detailSummary) status() int {
	if d.err != nil {
		return d.failedStatus
	}
	return http.StatusOK
}

// newPollRun prepares a poll of t, on a context that outlives ctx's cancellation.
func newPollRun(ctx context.Context, t *Target, book *locationBook, start time.Time, budget time.Duration) *pollRun {
	p := &pollRun{
		t: t, book: book, start: start, trace: &client.Trace{}, allIn: make(chan struct{}), budget: budget,
		lists: make(map[client.Endpoint]client.ListResult, 3), seen: make(map[int64]bool), active: 1,
	}
	p.ctx, p.cancel = context.WithCancelCause(client.WithTrace(context.WithoutCancel(ctx), p.trace))
	p.wake = sync.NewCond(&p.mu)
	return p
}

// run reads the whole API once: root, both lists and the explicit detail
// views at once, and ids drawn from the list as their page arrives.
func (p *pollRun) run() *Snapshot {
	defer p.cancel(nil)
	c := p.t.Client
	p.enqueue(p.t.DetailIDs)
	p.mu.Lock()
	p.closed = len(p.t.DetailIDs) > 0
	p.read(client.EndpointRoot, func() client.ListResult { return client.ListResult{Result: c.Root(p.ctx)} })
	p.read(client.EndpointProjects, func() client.ListResult { return c.Projects(p.ctx) })
	p.read(client.EndpointLocations, func() client.ListResult { return c.Locations(p.ctx, p.t.idsFromList(), p.enqueue) })
	p.addWorkers()
	p.arrived()
	p.mu.Unlock()
	<-p.allIn
	return p.snapshot()
}

// read runs one of root and the lists, whose slot then goes to a detail worker.
func (p *pollRun) read(ep client.Endpoint, call func() client.ListResult) {
	p.active++
	p.listsOut++
	go func() {
		r := call()
		p.mu.Lock()
		defer p.mu.Unlock()
		p.lists[ep] = r
		if r.IDErr != nil {
			// Entries without an integer id fail location_detail, not the list.
			p.detail.fail(0, r.IDErr)
		}
		if ep == client.EndpointLocations && p.t.idsFromList() > 0 {
			if r.Err == nil {
				p.book.keepOnly(func(id int64) bool { return p.seen[id] })
			}
			p.closed = true
			p.wake.Broadcast()
		}
		p.listsOut--
		p.addWorkers()
		p.arrived()
	}()
}

// addWorkers starts detail workers in the slots the lists leave free
// (under a rate limit, once they are done).
func (p *pollRun) addWorkers() {
	if !p.t.wantsDetails() || p.listsOut > 0 && p.t.Client.RateLimited() {
		return
	}
	for ; p.workers < p.t.Client.Concurrency()-p.listsOut; p.workers++ {
		p.active++
		go p.checkDetails()
	}
}

// arrived marks one call's results as in.
func (p *pollRun) arrived() {
	p.active--
	if p.active == 0 {
		close(p.allIn)
	}
}

// enqueue queues each id once per poll, even if a shifting list shows it twice.
func (p *pollRun) enqueue(ids []int64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, id := range ids {
		if !p.seen[id] {
			p.seen[id] = true
			p.subset = append(p.subset, id)
			last := p.book.lastChecked(id)
			i := sort.Search(len(p.queue), func(i int) bool { return p.queue[i].last.After(last) })
			p.queue = slices.Insert(p.queue, i, queuedDetail{id: id, last: last})
			p.wake.Signal()
		}
	}
}

// nextDetail waits for the next id and the time to check it; false when none is left.
func (p *pollRun) nextDetail() (int64, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for {
		switch {
		case p.ctx.Err() != nil, p.closed && len(p.queue) == 0:
			return 0, false
		case len(p.queue) > 0 && p.timeForDetail():
			id := p.queue[0].id
			p.queue = p.queue[1:]
			return id, true
		}
		p.wake.Wait()
	}
}

// checkDetails is one worker, checking queued detail views until none is left.
func (p *pollRun) checkDetails() {
	for id, ok := p.nextDetail(); ok; id, ok = p.nextDetail() {
		start := time.Now()
		r := p.t.Client.LocationDetail(p.ctx, id, p.t.InfoFields)
		p.checked(id, start, time.Now(), r)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.arrived()
}

// timeForDetail tells whether the poll, by its deadline, has the time a detail
// view usually takes, at most half its budget so that slow views still show.
func (p *pollRun) timeForDetail() bool {
	usual := p.book.usual()
	deadline := p.start.Add(p.budget - handoffMargin(p.budget))
	return usual == 0 || time.Until(deadline) >= min(usual, p.budget/2)
}

// checked folds a detail view into the poll and the book; one never sent or
// cut short tells nothing of its location.
func (p *pollRun) checked(id int64, start, end time.Time, r client.DetailResult) {
	if errors.Is(r.Err, client.ErrHeldOff) {
		p.mu.Lock()
		defer p.mu.Unlock()
		p.detail.fail(r.Status, r.Err)
		return
	}
	if r.Err != nil && (r.Duration == 0 || p.cutShort(r)) {
		return
	}
	if r.Status > 0 && client.ReasonOf(r.Err) != client.ReasonTimeout {
		// Only views answered in full tell how long answers take.
		p.book.observe(r.Duration)
	}
	p.book.record(locationState{ID: id, Status: r.Status, Duration: r.Duration, Err: r.Err, Fields: r.Fields, Checked: end.Add(-r.Duration)})
	p.mu.Lock()
	defer p.mu.Unlock()
	p.detail.add(start, end, r.Status, r.Err)
}

// cutShort tells whether a failed view was cut by the poll's end before its usual time.
func (p *pollRun) cutShort(r client.DetailResult) bool {
	switch {
	case context.Cause(p.ctx) == nil || client.ReasonOf(r.Err) != client.ReasonTimeout:
		return false
	case p.abandoned():
		return true
	}
	p.mu.Lock()
	half := p.budget / 2
	p.mu.Unlock()
	// The usual time, at most half the budget; half while it is unknown.
	return r.Duration < min(cmp.Or(p.book.usual(), half), half)
}

// count is a list's count, known once the list was read whole.
func (p *pollRun) count(ep client.Endpoint) Count {
	if r, ok := p.lists[ep]; ok && r.Err == nil {
		return Count{Value: r.Count, Known: true}
	}
	return Count{}
}

// subsetIDs returns the ids whose series the poll reports.
func (p *pollRun) subsetIDs() []int64 {
	if len(p.t.DetailIDs) > 0 {
		return p.t.DetailIDs
	}
	if p.count(client.EndpointLocations).Known {
		return p.subset
	}
	ids := append(p.book.ids(), p.subset...)
	slices.Sort(ids)
	return slices.Compact(ids)
}

// snapshot turns what has arrived into a Snapshot; lists not yet in are too late.
func (p *pollRun) snapshot() *Snapshot {
	p.mu.Lock()
	defer p.mu.Unlock()
	now := time.Now()
	s := &Snapshot{
		Start: p.start, Duration: now.Sub(p.start), Endpoints: make(map[client.Endpoint]endpointState, 4),
		Projects: p.count(client.EndpointProjects), Locations: p.count(client.EndpointLocations), trace: p.trace, budget: p.budget,
	}
	for _, ep := range upEndpoints {
		s.Endpoints[ep] = endpointState{Duration: s.Duration, Err: errTooLate}
		if r, ok := p.lists[ep]; ok {
			s.Endpoints[ep] = endpointState{Status: r.Status, Duration: r.Duration, Err: r.Err}
		}
	}
	ids := p.subsetIDs()
	s.Details = p.book.view(ids)
	unchecked := endpointState{Err: errNoDetail} // location_detail in a poll that checked no view
	if until, status := p.t.Client.HoldOff(); now.Before(until) {
		s.HoldOffUntil, unchecked = until, endpointState{Status: status, Err: client.ErrHeldOff}
	}
	switch d := &p.detail; {
	case !d.firstStart.IsZero() || d.err != nil:
		s.Endpoints[client.EndpointLocationDetail] = endpointState{Status: d.status(), Duration: d.lastEnd.Sub(d.firstStart), Err: d.err}
	case len(ids) > 0 || p.t.wantsDetails() && !s.Locations.Known:
		s.Endpoints[client.EndpointLocationDetail] = unchecked
	}
	return s
}

// setBudget grows the poll's budget when a scrape with more time joins it.
func (p *pollRun) setBudget(d time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.budget = d
	p.wake.Broadcast()
}

// end cancels the poll with cause, unless every result is in.
func (p *pollRun) end(cause error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.active > 0 {
		p.cancel(cause)
		p.wake.Broadcast()
	}
}

// abandoned tells whether the poll ended before every result was in, and not by a deadline.
func (p *pollRun) abandoned() bool {
	cause := context.Cause(p.ctx)
	return errors.Is(cause, errAbandoned) || errors.Is(cause, errDropped)
}

func maxTime(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}
