package collector

import (
	"cmp"
	"context"
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
type pollRun struct {
	ctx    context.Context
	t      *Target
	start  time.Time
	trace  *client.Trace
	budget time.Duration
	wg     sync.WaitGroup

	mu        sync.Mutex
	root      *client.Result
	projects  *client.ListResult
	locations *client.ListResult
	seen      map[int64]bool
	details   map[int64]*locationState
	detailSum detailSummary
	// settled tells that the poll's outcome no longer depends on its
	// scrapes: every result has arrived, or its deadline has passed.
	// cancelled tells that every scrape gave up on the poll before that.
	settled, cancelled bool
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
// pending tells that some views are still out, which counts as failed
// without a response.
func (d *detailSummary) status(pending bool) int {
	if d.failed || pending {
		return d.failedStatus
	}
	return http.StatusOK
}

func newPollRun(ctx context.Context, t *Target, trace *client.Trace, budget time.Duration) *pollRun {
	return &pollRun{
		ctx: ctx, t: t, start: time.Now(), trace: trace, budget: budget,
		seen: make(map[int64]bool), details: make(map[int64]*locationState),
	}
}

// run reads the whole API once. Root, both lists and the explicit detail
// views start at once; ids drawn from the list start as soon as the page
// holding them arrives. The client bounds how many requests are in flight,
// so the wall time is the critical path of the round trips.
func (p *pollRun) run() *Snapshot {
	inLine := p.startLists()
	// The explicit detail views start alongside the lists, but only once
	// the lists are in line: the client serves waiting lists first, and a
	// detail view must not take a free slot before a list has asked.
	p.waitInLine(inLine)
	for _, id := range p.t.DetailIDs {
		p.detail(id)
	}
	p.wg.Wait()
	p.settle()
	return p.snapshot()
}

// pollLists is how many list calls a poll starts: root, projects and
// locations.
const pollLists = 3

// startLists starts the list calls, each in its own goroutine. The channel
// returned hears once from each.
func (p *pollRun) startLists() <-chan struct{} {
	inLine := make(chan struct{}, pollLists)
	p.startList(inLine, p.readRoot)
	p.startList(inLine, p.readProjects)
	p.startList(inLine, p.readLocations)
	return inLine
}

// startList starts one list call. It reports on inLine once: when its
// request is in line for a slot, or when it returns without one (held
// off, say).
func (p *pollRun) startList(inLine chan<- struct{}, call func(ctx context.Context)) {
	var once sync.Once
	report := func() { once.Do(func() { inLine <- struct{}{} }) }
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		defer report()
		call(client.WithQueuedHook(p.ctx, report))
	}()
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
	p.root = &r
	p.mu.Unlock()
}

func (p *pollRun) readProjects(ctx context.Context) {
	r := p.t.Client.Projects(ctx)
	p.mu.Lock()
	p.projects = &r
	p.mu.Unlock()
}

// readLocations reads the locations list. Without explicit ids, it starts
// the detail views of the first DetailLimit ids as their pages arrive.
func (p *pollRun) readLocations(ctx context.Context) {
	want, onIDs := 0, func([]int64) {}
	if len(p.t.DetailIDs) == 0 && p.t.DetailLimit > 0 {
		want = p.t.DetailLimit
		onIDs = func(ids []int64) {
			for _, id := range ids {
				p.detail(id)
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
}

// detail starts the detail view of id, once per poll even when a shifting
// list shows an id twice.
func (p *pollRun) detail(id int64) {
	p.mu.Lock()
	if p.seen[id] {
		p.mu.Unlock()
		return
	}
	p.seen[id] = true
	p.mu.Unlock()

	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		start := time.Now()
		r := p.t.Client.LocationDetail(p.ctx, id, p.t.InfoFields)
		end := time.Now()
		p.mu.Lock()
		defer p.mu.Unlock()
		p.details[id] = &locationState{ID: id, Status: r.Status, Duration: r.Duration, Err: r.Err, Fields: r.Fields}
		p.detailSum.add(start, end, r.Status, r.Err)
	}()
}

// snapshot turns what has arrived into a Snapshot. Taken before the poll
// is over, it reports whatever has not arrived as too late: down, with no
// status and no count.
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
	pending := false
	for id := range p.seen {
		if d, ok := p.details[id]; ok {
			s.Details = append(s.Details, *d)
			continue
		}
		pending = true
		s.Details = append(s.Details, locationState{ID: id, Duration: now.Sub(p.start), Err: errTooLate})
	}
	slices.SortFunc(s.Details, func(a, b locationState) int { return cmp.Compare(a.ID, b.ID) })
	switch d := &p.detailSum; {
	case pending:
		s.Endpoints[client.EndpointLocationDetail] = endpointState{Status: d.status(true), Duration: now.Sub(p.start), Err: errTooLate}
	case d.tried || d.failed:
		s.Endpoints[client.EndpointLocationDetail] = endpointState{Status: d.status(false), Duration: d.lastEnd.Sub(d.firstStart), Err: d.err}
	}
	s.HoldOffUntil = holdOffAt(p.t.Client, now)
	return s
}

// setBudget records the time the poll was given, which grows when a scrape
// with more time joins it.
func (p *pollRun) setBudget(d time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.budget = d
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
