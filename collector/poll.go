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
	// DetailIDs are the locations whose detail views are read on every poll.
	DetailIDs []int64
	// DetailLimit, used when DetailIDs is empty, reads the detail views of
	// the first DetailLimit locations of the list.
	DetailLimit int
	// InfoFields are the detail view fields exposed as info labels.
	InfoFields []string
}

func (t *Target) wantsDetails() bool { return len(t.DetailIDs) > 0 || t.DetailLimit > 0 }

// pollRun is one poll of the API. Its results gather as requests finish,
// so a scrape that cannot wait any longer can take what has arrived.
//
// Detail views are checked by a few workers (as many as the client's
// concurrency) from a queue that puts the location checked longest ago
// first. A worker starts a view only when the poll has the time such a
// view usually takes: a subset larger than one poll can check is checked
// in turns, and running out of time is never a location's failure.
type pollRun struct {
	ctx   context.Context
	t     *Target
	book  *locationBook
	start time.Time
	trace *client.Trace
	wg    sync.WaitGroup

	mu        sync.Mutex
	wake      *sync.Cond // on mu: the queue changed, or the poll ends
	budget    time.Duration
	root      *client.Result
	projects  *client.ListResult
	locations *client.ListResult
	// subset holds the detail ids met in this poll, in order; seen the
	// same as a set.
	subset []int64
	seen   map[int64]bool
	queue  detailQueue
	// closed tells that no more ids will join the queue; outOfTime that
	// the poll starts no more detail views.
	closed, outOfTime bool
	detailSum         detailSummary
	// active counts the calls whose results are still out, the run's own
	// start among them. The one that brings it to zero settles the poll in
	// the same step, so a finished poll can never be taken for abandoned.
	active int
	// settled tells that the poll's outcome no longer depends on its
	// scrapes: every result has arrived, or its deadline has passed.
	// cancelled tells that every scrape gave up on the poll before that.
	settled, cancelled bool
	// waitedHook, set by tests only, runs once every call has returned.
	waitedHook func()
}

// detailSummary sums up the detail views as the location_detail endpoint:
// up when every one answered well, timed from the first start to the last
// end. Its status is the highest among the failed views, so that a refused
// view (401, 403) shows even when others answered after it; 200 when
// none failed.
type detailSummary struct {
	tried               bool
	firstStart, lastEnd time.Time
	failed              bool
	failedStatus        int
	err                 error
}

// add folds one detail view that ran from start to end into the summary.
func (d *detailSummary) add(start, end time.Time, status int, err error) {
	if !d.tried || start.Before(d.firstStart) {
		d.firstStart = start
	}
	d.tried = true
	d.lastEnd = maxTime(d.lastEnd, end)
	if err != nil {
		d.fail(status, err)
	}
}

// fail folds a failure with the status of its response (0 when none came)
// into the summary: a failed detail view, or anything else that stands for
// detail views that could not be read.
func (d *detailSummary) fail(status int, err error) {
	d.failed = true
	d.failedStatus = max(d.failedStatus, status)
	if d.err == nil {
		d.err = err
	}
}

// status is the location_detail status code: the highest status among the
// failed views, 0 when none of them got a response, 200 when none failed.
func (d *detailSummary) status() int {
	if d.failed {
		return d.failedStatus
	}
	return http.StatusOK
}

func newPollRun(ctx context.Context, t *Target, book *locationBook, trace *client.Trace, budget time.Duration) *pollRun {
	p := &pollRun{
		ctx: ctx, t: t, book: book, start: time.Now(), trace: trace, budget: budget,
		seen: make(map[int64]bool), active: 1,
	}
	p.wake = sync.NewCond(&p.mu)
	return p
}

// run reads the whole API once. Root, both lists and the explicit detail
// views start at once; ids drawn from the list join the queue as soon as
// the page holding them arrives. The client bounds how many requests are
// in flight, so the wall time is the critical path of the round trips.
func (p *pollRun) run() *Snapshot {
	inLine := p.startLists()
	// The explicit detail views start alongside the lists, but only once
	// the lists are in line: the client serves waiting lists first, and a
	// detail view must not take a free slot before a list has asked.
	p.waitInLine(inLine)
	if p.t.wantsDetails() {
		p.mu.Lock()
		for _, id := range p.t.DetailIDs {
			p.enqueue(id)
		}
		if len(p.t.DetailIDs) > 0 {
			p.closeQueue()
		}
		p.mu.Unlock()
		// Workers wake when the poll ends, whatever they wait for.
		stop := context.AfterFunc(p.ctx, func() {
			p.mu.Lock()
			p.wake.Broadcast()
			p.mu.Unlock()
		})
		defer stop()
		for range p.t.Client.Concurrency() {
			p.startCall(p.checkDetails)
		}
	}
	p.mu.Lock()
	p.done()
	p.mu.Unlock()
	p.wg.Wait()
	if p.waitedHook != nil {
		p.waitedHook()
	}
	return p.snapshot()
}

// pollLists is how many list calls a poll starts: root, projects and
// locations.
const pollLists = 3

// startLists starts the list calls, each in its own goroutine. The channel
// returned hears once from each.
func (p *pollRun) startLists() <-chan struct{} {
	inLine := make(chan struct{}, pollLists)
	for _, call := range []func(context.Context){p.readRoot, p.readProjects, p.readLocations} {
		var once sync.Once
		report := func() { once.Do(func() { inLine <- struct{}{} }) }
		p.startCall(func() {
			defer report()
			call(client.WithQueuedHook(p.ctx, report))
		})
	}
	return inLine
}

// startCall runs call in a goroutine of its own, as one of the calls whose
// results are out until it calls done.
func (p *pollRun) startCall(call func()) {
	p.mu.Lock()
	p.active++
	p.mu.Unlock()
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		call()
	}()
}

// done marks one call's results as in, settling the poll with the last;
// p.mu is held.
func (p *pollRun) done() {
	p.active--
	if p.active == 0 {
		p.settled = true
	}
}

// waitInLine waits until every list call has reported on inLine, or the
// poll's context ends.
func (p *pollRun) waitInLine(inLine <-chan struct{}) {
	for range pollLists {
		select {
		case <-inLine:
		case <-p.ctx.Done():
		}
	}
}

func (p *pollRun) readRoot(ctx context.Context) {
	r := p.t.Client.Root(ctx)
	p.mu.Lock()
	defer p.mu.Unlock()
	p.root = &r
	p.done()
}

func (p *pollRun) readProjects(ctx context.Context) {
	r := p.t.Client.Projects(ctx)
	p.mu.Lock()
	defer p.mu.Unlock()
	p.projects = &r
	p.done()
}

// readLocations reads the locations list. Without explicit ids, the first
// DetailLimit ids join the detail queue as their pages arrive; once the
// whole list is read, they are the subset, and the book forgets the
// locations that left it.
func (p *pollRun) readLocations(ctx context.Context) {
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
	r := p.t.Client.Locations(ctx, want, onIDs)
	p.mu.Lock()
	defer p.mu.Unlock()
	p.locations = &r
	if r.IDErr != nil {
		// Entries without an integer id leave their detail views
		// unreadable: location_detail fails, the list itself stays up.
		// The client has already counted these failures.
		p.detailSum.fail(0, r.IDErr)
	}
	if limitMode {
		if r.Err == nil {
			p.book.keepOnly(p.seen)
		}
		p.closeQueue()
	}
	p.done()
}

// enqueue puts the detail view of id in the queue, once per poll even
// when a shifting list shows an id twice; p.mu is held.
func (p *pollRun) enqueue(id int64) {
	if p.seen[id] {
		return
	}
	p.seen[id] = true
	p.subset = append(p.subset, id)
	p.queue.add(queuedDetail{id: id, last: p.book.lastChecked(id), seq: len(p.subset)})
	p.wake.Signal()
}

// closeQueue tells the workers that no more ids will come; p.mu is held.
func (p *pollRun) closeQueue() {
	p.closed = true
	p.wake.Broadcast()
}

// nextDetail waits for the next id to check. It reports false when there
// is none left to start in this poll.
func (p *pollRun) nextDetail() (int64, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for {
		switch {
		case p.ctx.Err() != nil, p.closed && p.queue.Len() == 0:
			return 0, false
		case p.outOfTime:
			// No time for another view, unless a scrape with more time
			// joins the poll (setBudget): wait for that, or the end.
		case p.queue.Len() > 0:
			return p.queue.next(), true
		}
		p.wake.Wait()
	}
}

// checkDetails is one worker: it checks detail views from the queue until
// none is left to start.
func (p *pollRun) checkDetails() {
	defer func() {
		p.mu.Lock()
		p.done()
		p.mu.Unlock()
	}()
	ctx := client.WithSendCheck(p.ctx, p.timeForDetail)
	for {
		id, ok := p.nextDetail()
		if !ok {
			return
		}
		start := time.Now()
		r := p.t.Client.LocationDetail(ctx, id, p.t.InfoFields)
		if errors.Is(r.Err, errNoTime) {
			// Back in its place, for a scrape with more time that joins.
			p.mu.Lock()
			p.queue.add(queuedDetail{id: id, last: p.book.lastChecked(id)})
			p.mu.Unlock()
			continue
		}
		p.checked(id, start, time.Now(), r)
	}
}

// errNoDetail stands for the detail views of a poll that checked none.
var errNoDetail = errors.New("no detail view was checked in this poll")

// errNoTime stops a detail view that the poll has no time left for.
var errNoTime = errors.New("not started: the poll has less time left than a detail view usually takes")

// timeForDetail lets a detail view go when the poll has at least the time
// such a view usually takes, or half its budget when views usually take
// longer (so that views slow for a while are still tried, and their
// slowness shows); otherwise the poll starts no more of them unless a
// scrape with more time joins. Before any view has run to its end, every
// one may go.
func (p *pollRun) timeForDetail() error {
	usual := p.book.usual()
	p.mu.Lock()
	defer p.mu.Unlock()
	if usual == 0 || time.Until(p.deadline()) >= min(usual, p.budget/2) {
		return nil
	}
	p.outOfTime = true
	p.wake.Broadcast()
	return errNoTime
}

// deadline is when the poll ends, unless a scrape with more time joins
// it; p.mu is held.
func (p *pollRun) deadline() time.Time {
	return p.start.Add(p.budget - handoffMargin(p.budget))
}

// checked folds the outcome of a detail view into the poll and the book.
// A view never sent, or cut short by the poll's end after less time than
// such a view usually takes (or by every scrape leaving), tells nothing
// of its location, which keeps its last result. Any other outcome is the
// location's new result; a slow view is a timeout, never hidden.
func (p *pollRun) checked(id int64, start, end time.Time, r client.DetailResult) {
	if errors.Is(r.Err, client.ErrHeldOff) {
		// Not sent: a hold-off began during the poll.
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

// cutShort tells whether a failed detail view was cut short by the end of
// the poll rather than slow on its own: every scrape left (or a reload
// dropped the target), or the deadline came before it had the time such a
// view usually takes (or half the poll's budget, when that is less or the
// usual time is unknown).
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

// subsetIDs returns the ids whose series the poll reports: the explicit
// ids; or those the list gave, and while the list is not read whole, the
// ones the book holds from earlier polls too; p.mu is held.
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

// snapshot turns what has arrived into a Snapshot. Taken before the poll
// is over, it reports the lists that have not arrived as too late: down,
// with no status and no count. Locations keep their last result.
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
	s.HoldOffUntil = holdOffAt(p.t.Client, now)
	listFailed := p.locations == nil || p.locations.Err != nil
	switch d := &p.detailSum; {
	case d.tried || d.failed:
		s.Endpoints[client.EndpointLocationDetail] = endpointState{Status: d.status(), Duration: d.lastEnd.Sub(d.firstStart), Err: d.err}
	case len(ids) > 0 || p.t.wantsDetails() && listFailed:
		// None checked: down, never up from the kept results of earlier polls.
		s.Endpoints[client.EndpointLocationDetail] = uncheckedDetails(p.t.Client, s.HoldOffUntil)
	}
	return s
}

// uncheckedDetails is location_detail in a poll that checked no detail
// view: down, with the status of the hold-off when one is in force.
func uncheckedDetails(c *client.Client, heldUntil time.Time) endpointState {
	if heldUntil.IsZero() {
		return endpointState{Err: errNoDetail}
	}
	_, status := c.HoldOff()
	return endpointState{Status: status, Err: client.ErrHeldOff}
}

// setBudget records the time the poll was given, which grows when a scrape
// with more time joins it.
func (p *pollRun) setBudget(d time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.budget = d
	if p.outOfTime {
		// The time check starts over for the scrape that brought more.
		p.outOfTime = false
		p.wake.Broadcast()
	}
}

// settle marks the poll's outcome as fixed: every result has arrived, or
// the deadline has passed and what is still out will be a timeout.
func (p *pollRun) settle() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.settled = true
}

// abandon marks the poll as given up by every scrape, unless its outcome
// is already fixed: a complete poll stays complete.
func (p *pollRun) abandon() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.settled {
		p.cancelled = true
	}
}

// abandoned tells whether every scrape gave up on the poll before all its
// results arrived, so that what it holds is cut short by the cancellation.
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
