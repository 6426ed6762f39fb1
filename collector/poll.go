package collector

import (
	"cmp"
	"context"
	"errors"
	"maps"
	"net/http"
	"slices"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/deployment-service/deployment_service_exporter/client"
)

// poll is one poll of the API, shared by its scrapes; the Poller's mu guards the fields after done.
type poll struct {
	ctx     context.Context
	cancel  context.CancelCauseFunc
	start   time.Time
	trace   *client.Trace
	wake    chan struct{} // a call ended, an id came or the horizon moved
	done    chan struct{} // closed once snap is final
	calls   sync.WaitGroup
	running atomic.Int32 // calls out

	seq                    uint64
	waiters                int       // scrapes waiting
	horizon                time.Time // the latest deadline of its scrapes
	lists                  map[client.Endpoint]client.ListResult
	subset                 map[int64]bool // detail ids met in this poll
	queue                  []int64        // those yet to start, oldest check first
	closed                 bool           // no more ids will come
	longest                time.Duration
	detailStart, detailEnd time.Time
	detailStatus           int   // the highest status of the failed views
	detailErr              error // the first failure
	snap                   *Snapshot
}

// run starts root and the lists, then detail views while one can end before the horizon, each in a slot.
func (p *Poller) run(c *poll) {
	defer c.cancel(nil)
	api, t := p.target.Client, p.target
	p.enqueue(c, t.DetailIDs)
	p.launch(c, func() { p.listIn(c, client.EndpointRoot, client.ListResult{Result: api.Root(c.ctx)}) })
	p.launch(c, func() { p.listIn(c, client.EndpointProjects, api.Projects(c.ctx)) })
	p.launch(c, func() {
		r := api.Locations(c.ctx, t.idsFromList(), func(ids []int64) { p.enqueue(c, ids) })
		p.listIn(c, client.EndpointLocations, r)
	})
	for p.launch(c, nil) {
	}
	c.calls.Wait()
	if p.opts.AfterPoll != nil {
		p.opts.AfterPoll()
	}
	p.finish(c)
}

// launch runs call, or else the next detail view, in a slot; false when none is left to start.
func (p *Poller) launch(c *poll, call func()) bool {
	select {
	case p.sem <- struct{}{}:
	case <-c.ctx.Done():
		return false
	}
	if call == nil {
		id, ok := p.nextDetail(c)
		if !ok {
			<-p.sem
			return false
		}
		call = func() { p.checkDetail(c, id) }
	}
	c.running.Add(1)
	c.calls.Go(func() {
		call()
		<-p.sem
		c.running.Add(-1)
		c.poke()
	})
	return true
}

// nextDetail waits for the view to start next, the location checked longest ago first.
func (p *Poller) nextDetail(c *poll) (int64, bool) {
	for {
		p.mu.Lock()
		listed := !p.target.Client.RateLimited() || len(c.lists) == len(upEndpoints) // a rate limit's turns go to the lists first
		left := time.Until(c.horizon) - handoffMargin(c.horizon.Sub(c.start))
		unknown := c.longest == 0 && p.usualDetail == 0 // no view has answered yet: try while time is left
		if len(c.queue) > 0 && listed && (left >= p.usual(c) || unknown && left > 0) {
			id := c.queue[0]
			c.queue = c.queue[1:]
			p.mu.Unlock()
			return id, true
		}
		// Ids may still come, or a scrape with more time join while calls are out.
		wait := !c.closed || len(c.queue) > 0 && c.running.Load() > 0
		p.mu.Unlock()
		if !wait {
			return 0, false
		}
		select {
		case <-c.wake:
		case <-c.ctx.Done():
			return 0, false
		}
	}
}

func (c *poll) poke() {
	select {
	case c.wake <- struct{}{}:
	default:
	}
}

// usual is the longest detail view of this poll, else of the last, at most half the budget.
func (p *Poller) usual(c *poll) time.Duration {
	half := c.horizon.Sub(c.start) / 2
	return min(cmp.Or(c.longest, p.usualDetail, half), half)
}

// enqueue queues each id once per poll, even if a shifting list shows it twice.
func (p *Poller) enqueue(c *poll, ids []int64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, id := range ids {
		if !c.subset[id] {
			c.subset[id] = true
			last := p.checks[id].Checked
			i := sort.Search(len(c.queue), func(i int) bool { return p.checks[c.queue[i]].Checked.After(last) })
			c.queue = slices.Insert(c.queue, i, id)
		}
	}
	c.poke()
}

// listIn keeps a list's result; a location list read whole settles the subset drawn from it.
func (p *Poller) listIn(c *poll, ep client.Endpoint, r client.ListResult) {
	p.mu.Lock()
	defer p.mu.Unlock()
	c.lists[ep] = r
	if r.IDErr != nil {
		c.failDetail(0, r.IDErr) // entries without an integer id fail location_detail, not the list
	}
	if ep == client.EndpointLocations && !c.closed {
		room := 0 // a list read whole is the subset; one that failed keeps the latest other checks up to the limit
		if r.Err != nil {
			room = p.target.DetailLimit - len(c.subset)
		}
		others := slices.DeleteFunc(slices.Collect(maps.Keys(p.checks)), func(id int64) bool { return c.subset[id] })
		slices.SortFunc(others, func(a, b int64) int { return p.checks[b].Checked.Compare(p.checks[a].Checked) })
		for _, id := range others[min(max(room, 0), len(others)):] {
			delete(p.checks, id)
		}
		c.closed = true
	}
}

// checkDetail checks one location; a view never sent or cut short tells nothing of it.
func (p *Poller) checkDetail(c *poll, id int64) {
	start := time.Now()
	r := p.target.Client.LocationDetail(c.ctx, id, p.target.InfoFields)
	end := time.Now()
	p.mu.Lock()
	defer p.mu.Unlock()
	timeout := client.ReasonOf(r.Err) == client.ReasonTimeout
	cut := timeout && context.Cause(c.ctx) != nil && (c.abandoned() || r.Duration < p.usual(c))
	switch {
	case errors.Is(r.Err, client.ErrHeldOff):
		c.failDetail(r.Status, r.Err)
		return
	case r.Err != nil && (r.Duration == 0 || cut):
		return
	case r.Status > 0 && !timeout:
		c.longest = max(c.longest, r.Duration)
	}
	ls := locationState{endpointState: endpointState{r.Status, r.Duration, r.Err}, ID: id, Fields: r.Fields, Checked: end.Add(-r.Duration)}
	if old, ok := p.checks[id]; !ok || !old.Checked.After(ls.Checked) {
		p.checks[id] = ls
	}
	if c.detailStart.IsZero() || start.Before(c.detailStart) {
		c.detailStart = start
	}
	if end.After(c.detailEnd) {
		c.detailEnd = end
	}
	if r.Err != nil {
		c.failDetail(r.Status, r.Err)
	}
}

func (c *poll) failDetail(status int, err error) {
	c.detailStatus, c.detailErr = max(c.detailStatus, status), cmp.Or(c.detailErr, err)
}

func (c *poll) abandoned() bool {
	cause := context.Cause(c.ctx)
	return errors.Is(cause, errAbandoned) || errors.Is(cause, errDropped)
}

// snapshot turns what has arrived into a Snapshot; lists not yet in are too late.
func (p *Poller) snapshot(c *poll, now time.Time) *Snapshot {
	s := &Snapshot{
		Start: c.start, Duration: now.Sub(c.start), Endpoints: make(map[client.Endpoint]endpointState, 4), trace: c.trace, budget: c.horizon.Sub(c.start),
	}
	counts := make(map[client.Endpoint]Count, 3) // a list not read whole has no count
	for _, ep := range upEndpoints {
		s.Endpoints[ep] = endpointState{Duration: s.Duration, Err: errTooLate}
		if r, ok := c.lists[ep]; ok {
			s.Endpoints[ep], counts[ep] = endpointState{Status: r.Status, Duration: r.Duration, Err: r.Err}, Count{Value: r.Count, Known: r.Err == nil}
		}
	}
	s.Projects, s.Locations = counts[client.EndpointProjects], counts[client.EndpointLocations]
	// The subset: the ids given, else those of the list read whole, else those checked before.
	ids := p.target.DetailIDs
	if len(ids) == 0 && s.Locations.Known {
		ids = slices.Collect(maps.Keys(c.subset))
	} else if len(ids) == 0 {
		ids = slices.Collect(maps.Keys(p.checks))
	}
	for _, id := range slices.Sorted(slices.Values(ids)) {
		if ls, ok := p.checks[id]; ok {
			s.Details = append(s.Details, ls)
		}
	}
	unchecked := endpointState{Err: errNoDetail}
	if until, status := p.target.Client.HoldOff(); now.Before(until) {
		s.HoldOffUntil, unchecked = until, endpointState{Status: status, Err: client.ErrHeldOff}
	}
	switch {
	case c.detailErr != nil:
		s.Endpoints[client.EndpointLocationDetail] = endpointState{Status: c.detailStatus, Duration: c.detailEnd.Sub(c.detailStart), Err: c.detailErr}
	case !c.detailStart.IsZero():
		s.Endpoints[client.EndpointLocationDetail] = endpointState{Status: http.StatusOK, Duration: c.detailEnd.Sub(c.detailStart)}
	case len(ids) > 0 || p.target.wantsDetails() && !s.Locations.Known:
		s.Endpoints[client.EndpointLocationDetail] = unchecked
	}
	return s
}

// failed is a poll that sent nothing: the lists are down, the subset keeps its last checks.
func (p *Poller) failed(now time.Time, status int, err error) *Snapshot {
	c := &poll{start: now, horizon: now, lists: make(map[client.Endpoint]client.ListResult, 3)}
	for _, ep := range upEndpoints {
		c.lists[ep] = client.ListResult{Result: client.Result{Status: status, Err: err}}
	}
	if p.target.wantsDetails() {
		c.failDetail(status, err)
	}
	return p.snapshot(c, now)
}

// Snapshot is what one poll of the API found, as plain values.
type Snapshot struct {
	Start               time.Time
	Duration            time.Duration
	Endpoints           map[client.Endpoint]endpointState
	Projects, Locations Count
	Details             []locationState // each subset location's last check, by this poll or an earlier one
	HoldOffUntil        time.Time       // the end of the hold-off in force; zero if none

	trace  *client.Trace
	budget time.Duration // of a poll that its deadline cut short; 0 for one that ended on its own
}

// endpointState is how one endpoint answered during a poll; Status is 0 when no response came.
type endpointState struct {
	Status   int
	Duration time.Duration
	Err      error
}

// Count is a list count; Known is false when the list could not be read.
type Count struct {
	Value int64
	Known bool
}

type locationState struct {
	endpointState
	ID      int64
	Fields  map[string]string
	Checked time.Time
}

var upEndpoints = []client.Endpoint{client.EndpointRoot, client.EndpointProjects, client.EndpointLocations}

func (s *Snapshot) up() bool {
	return !slices.ContainsFunc(upEndpoints, func(ep client.Endpoint) bool {
		st, ok := s.Endpoints[ep]
		return !ok || st.Err != nil
	})
}
