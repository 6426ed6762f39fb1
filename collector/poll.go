package collector

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/deployment-service/deployment_service_exporter/client"
)

// Target is one watched service and what to read from it.
type Target struct {
	Client *client.Client
	// DetailIDs are the detail subset; without them, the list's first DetailLimit.
	DetailIDs   []int64
	DetailLimit int
	InfoFields  []string // detail view fields exposed as info labels
}

func (t *Target) wantsDetails() bool { return len(t.DetailIDs) > 0 || t.DetailLimit > 0 }

// pollRun is one poll of the API. Its results gather as requests finish,
// so a scrape that cannot wait any longer can take what has arrived.
type pollRun struct {
	ctx   context.Context
	t     *Target
	book  *locationBook
	start time.Time
	trace *client.Trace
	allIn chan struct{} // closed when active falls to 0

	mu                sync.Mutex
	wake              *sync.Cond // on mu: the queue changed, or the poll ends
	budget            time.Duration
	root              *client.Result
	projects          *client.ListResult
	locations         *client.ListResult
	subset            []int64 // detail ids met in this poll, in order
	seen              map[int64]bool
	queue             detailQueue
	closed            bool // no more ids will join the queue
	detailSum         detailSummary
	listsOut, workers int
	active            int // calls whose results are out
	// settled: every result is in, or a deadline ended the poll; cancelled:
	// every scrape gave up on it before that.
	settled, cancelled bool
}

// detailSummary sums up the detail views as the location_detail endpoint.
type detailSummary struct {
	firstStart, lastEnd time.Time
	failed              bool
	failedStatus        int
	err                 error
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
	d.failed = true
	d.failedStatus = max(d.failedStatus, status)
	if d.err == nil {
		d.err = err
	}
}

// status is the highest status of the failed views, 200 when none failed.
func (d *detailSummary) status() int {
	if d.failed {
		return d.failedStatus
	}
	return http.StatusOK
}

func newPollRun(ctx context.Context, t *Target, book *locationBook, trace *client.Trace, budget time.Duration) *pollRun {
	p := &pollRun{
		ctx: ctx, t: t, book: book, start: time.Now(), trace: trace, budget: budget,
		seen: make(map[int64]bool), active: 1, allIn: make(chan struct{}),
	}
	p.wake = sync.NewCond(&p.mu)
	return p
}

// run reads the whole API once: root, both lists and the explicit detail
// views at once, and ids drawn from the list as their page arrives.
func (p *pollRun) run() *Snapshot {
	stop := context.AfterFunc(p.ctx, func() {
		p.mu.Lock()
		p.wake.Broadcast()
		p.mu.Unlock()
	})
	defer stop()
	p.mu.Lock()
	for _, id := range p.t.DetailIDs {
		p.enqueue(id)
	}
	if len(p.t.DetailIDs) > 0 {
		p.closeQueue()
	}
	p.listsOut = pollLists
	p.spawn(p.readRoot)
	p.spawn(p.readProjects)
	p.spawn(p.readLocations)
	p.addWorkers()
	p.done()
	p.mu.Unlock()
	<-p.allIn
	return p.snapshot()
}

// pollLists is how many list calls a poll starts: root, projects and locations.
const pollLists = 3

// spawn runs call, which calls done at its end, in a goroutine; p.mu is held.
func (p *pollRun) spawn(call func()) {
	p.active++
	go call()
}

// addWorkers starts detail workers in the slots the lists leave free
// (under a rate limit, once they are done); p.mu is held.
func (p *pollRun) addWorkers() {
	if !p.t.wantsDetails() || p.listsOut > 0 && p.t.Client.RateLimited() {
		return
	}
	for ; p.workers < p.t.Client.Concurrency()-p.listsOut; p.workers++ {
		p.spawn(p.checkDetails)
	}
}

// done marks one call's results as in, settling the poll with the last; p.mu is held.
func (p *pollRun) done() {
	p.active--
	if p.active == 0 {
		p.settled = true
		close(p.allIn)
	}
}

// listDone marks a list call as in, freeing its slot for a worker; p.mu is held.
func (p *pollRun) listDone() {
	p.listsOut--
	p.addWorkers()
	p.done()
}

func (p *pollRun) readRoot() {
	r := p.t.Client.Root(p.ctx)
	p.mu.Lock()
	defer p.mu.Unlock()
	p.root = &r
	p.listDone()
}

func (p *pollRun) readProjects() {
	r := p.t.Client.Projects(p.ctx)
	p.mu.Lock()
	defer p.mu.Unlock()
	p.projects = &r
	p.listDone()
}

// readLocations reads the locations list, and the detail subset from it in limit mode.
func (p *pollRun) readLocations() {
	want, onIDs := 0, func([]int64) {}
	limitMode := len(p.t.DetailIDs) == 0 && p.t.DetailLimit > 0
	if limitMode {
		want = p.t.DetailLimit
		onIDs = func(ids []int64) {
			p.mu.Lock()
			defer p.mu.Unlock()
			for _, id := range ids {
				p.enqueue(id)
			}
		}
	}
	r := p.t.Client.Locations(p.ctx, want, onIDs)
	p.mu.Lock()
	defer p.mu.Unlock()
	p.locations = &r
	if r.IDErr != nil {
		// Entries without an integer id fail location_detail, not the list.
		p.detailSum.fail(0, r.IDErr)
	}
	if limitMode {
		if r.Err == nil {
			p.book.keepOnly(p.seen)
		}
		p.closeQueue()
	}
	p.listDone()
}

// enqueue queues id once per poll, even if a shifting list shows it twice; p.mu is held.
func (p *pollRun) enqueue(id int64) {
	if p.seen[id] {
		return
	}
	p.seen[id] = true
	p.subset = append(p.subset, id)
	p.queue.add(queuedDetail{id: id, last: p.book.lastChecked(id)})
	p.wake.Signal()
}

func (p *pollRun) closeQueue() {
	p.closed = true
	p.wake.Broadcast()
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
			return p.queue.next(), true
		}
		p.wake.Wait()
	}
}

// checkDetails is one worker, checking queued detail views until none is left.
func (p *pollRun) checkDetails() {
	defer func() {
		p.mu.Lock()
		p.done()
		p.mu.Unlock()
	}()
	for {
		id, ok := p.nextDetail()
		if !ok {
			return
		}
		start := time.Now()
		r := p.t.Client.LocationDetail(p.ctx, id, p.t.InfoFields)
		p.checked(id, start, time.Now(), r)
	}
}

var errNoDetail = errors.New("no detail view was checked in this poll")

// timeForDetail tells whether the poll has the time a detail view usually
// takes, capped at half its budget so that slow views still show; p.mu is held.
func (p *pollRun) timeForDetail() bool {
	usual := p.book.usual()
	return usual == 0 || time.Until(p.deadline()) >= min(usual, p.budget/2)
}

// deadline is when the poll ends unless a scrape with more time joins; p.mu is held.
func (p *pollRun) deadline() time.Time {
	return p.start.Add(p.budget - handoffMargin(p.budget))
}

// checked folds a detail view into the poll and the book; one never sent or
// cut short tells nothing of its location.
func (p *pollRun) checked(id int64, start, end time.Time, r client.DetailResult) {
	if errors.Is(r.Err, client.ErrHeldOff) {
		p.mu.Lock()
		defer p.mu.Unlock()
		p.detailSum.fail(r.Status, r.Err)
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
	p.detailSum.add(start, end, r.Status, r.Err)
}

// cutShort tells whether a failed view was cut by the poll's end before its usual time.
func (p *pollRun) cutShort(r client.DetailResult) bool {
	switch cause := context.Cause(p.ctx); {
	case cause == nil || client.ReasonOf(r.Err) != client.ReasonTimeout:
		return false
	case errors.Is(cause, errAbandoned), errors.Is(cause, errDropped):
		return true
	}
	usual := p.book.usual()
	p.mu.Lock()
	half := p.budget / 2
	p.mu.Unlock()
	if usual == 0 || usual > half {
		usual = half
	}
	return r.Duration < usual
}

// subsetIDs returns the ids whose series the poll reports; p.mu is held.
func (p *pollRun) subsetIDs() []int64 {
	if len(p.t.DetailIDs) > 0 {
		return p.t.DetailIDs
	}
	if p.locations != nil && p.locations.Err == nil {
		return p.subset
	}
	ids := p.book.ids()
	known := len(ids)
	for _, id := range p.subset {
		if _, ok := slices.BinarySearch(ids[:known], id); !ok {
			ids = append(ids, id)
		}
	}
	return ids
}

// snapshot turns what has arrived into a Snapshot; lists not yet in are too late.
func (p *pollRun) snapshot() *Snapshot {
	p.mu.Lock()
	defer p.mu.Unlock()
	now := time.Now()
	tooLate := endpointState{Duration: now.Sub(p.start), Err: errTooLate}
	s := &Snapshot{
		Start: p.start, Duration: now.Sub(p.start), Endpoints: make(map[client.Endpoint]endpointState, 4),
		trace: p.trace, budget: p.budget,
	}
	s.Endpoints[client.EndpointRoot] = tooLate
	if p.root != nil {
		s.Endpoints[client.EndpointRoot] = stateOf(*p.root)
	}
	s.Endpoints[client.EndpointProjects] = tooLate
	if p.projects != nil {
		s.Endpoints[client.EndpointProjects] = stateOf(p.projects.Result)
		if p.projects.Err == nil {
			s.Projects = Count{Value: p.projects.Count, Known: true}
		}
	}
	s.Endpoints[client.EndpointLocations] = tooLate
	if p.locations != nil {
		s.Endpoints[client.EndpointLocations] = stateOf(p.locations.Result)
		if p.locations.Err == nil {
			s.Locations = Count{Value: p.locations.Count, Known: true}
		}
	}
	ids := p.subsetIDs()
	s.Details = p.book.view(ids)
	if until, _ := p.t.Client.HoldOff(); now.Before(until) {
		s.HoldOffUntil = until
	}
	listFailed := p.locations == nil || p.locations.Err != nil
	switch d := &p.detailSum; {
	case !d.firstStart.IsZero() || d.failed:
		s.Endpoints[client.EndpointLocationDetail] = endpointState{Status: d.status(), Duration: d.lastEnd.Sub(d.firstStart), Err: d.err}
	case len(ids) > 0 || p.t.wantsDetails() && listFailed:
		s.Endpoints[client.EndpointLocationDetail] = uncheckedDetails(p.t.Client, s.HoldOffUntil)
	}
	return s
}

// uncheckedDetails is location_detail, down, in a poll that checked no view.
func uncheckedDetails(c *client.Client, heldUntil time.Time) endpointState {
	if heldUntil.IsZero() {
		return endpointState{Err: errNoDetail}
	}
	_, status := c.HoldOff()
	return endpointState{Status: status, Err: client.ErrHeldOff}
}

// setBudget grows the poll's budget when a scrape with more time joins it.
func (p *pollRun) setBudget(d time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.budget = d
	p.wake.Broadcast()
}

// end fixes the outcome once no scrape waits: a deadline settles the poll, any
// other cause abandons it unless every result is in.
func (p *pollRun) end(byDeadline bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cancelled = p.cancelled || !byDeadline && !p.settled
	p.settled = true
}

func (p *pollRun) abandoned() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.cancelled
}

func stateOf(r client.Result) endpointState {
	return endpointState{Status: r.Status, Duration: r.Duration, Err: r.Err}
}

func maxTime(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}
