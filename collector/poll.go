package collector

import (
	"cmp"
	"context"
	"errors"
	"maps"
	"net/http"
	"slices"
	"time"

	"github.com/deployment-service/deployment_service_exporter/client"
)

// poll is one poll of the API, shared by the scrapes that wait for it. Its
// results gather as calls end, so a scrape that cannot wait any longer takes
// what has arrived. The fields after done are guarded by the Poller's mu.
type poll struct {
	ctx    context.Context
	cancel context.CancelCauseFunc
	start  time.Time
	trace  *client.Trace
	wake   chan struct{} // a call ended, an id came or the horizon moved
	done   chan struct{} // closed once snap is final

	seq     uint64
	waiters int
	horizon time.Time // the latest deadline of its scrapes
	lists   map[client.Endpoint]client.ListResult
	subset  []int64 // detail ids met in this poll, in order
	queue   []int64 // detail views yet to start
	closed  bool    // no more ids will join the queue
	running int     // calls started and not yet in
	longest time.Duration
	detail  detailSummary
	snap    *Snapshot
}

// run reads the whole API once. Root and both lists start first, each in a
// slot of the semaphore; then detail views start in turns as slots free up,
// while one can end before the horizon. It ends once no call is out.
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
	for p.busy(c) {
		<-c.wake
	}
	p.finish(c)
}

// launch takes a slot and runs call in it, or the next detail view when
// call is nil; false when the poll ended or no view is left to start.
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
	p.mu.Lock()
	c.running++
	p.mu.Unlock()
	go func() {
		call()
		<-p.sem
		p.mu.Lock()
		c.running--
		p.mu.Unlock()
		c.poke()
	}()
	return true
}

// nextDetail waits for the view to start next, the location checked longest
// ago first; false when none is left that can end before the horizon.
func (p *Poller) nextDetail(c *poll) (int64, bool) {
	for {
		p.mu.Lock()
		// Under a rate limit, turns go to the lists first.
		listed := !p.target.Client.RateLimited() || len(c.lists) == len(upEndpoints)
		if len(c.queue) > 0 && listed && p.fits(c) {
			id := slices.MinFunc(c.queue, func(a, b int64) int { return p.checks[a].Checked.Compare(p.checks[b].Checked) })
			c.queue = slices.DeleteFunc(c.queue, func(q int64) bool { return q == id })
			p.mu.Unlock()
			return id, true
		}
		// Ids may still come, or a scrape with more time join while calls are out.
		wait := !c.closed || len(c.queue) > 0 && c.running > 0
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

func (p *Poller) busy(c *poll) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return c.running > 0
}

// usual is how long a detail view takes, judged by the longest of this
// poll's, else of the last poll's, and at most half the budget so that slow views still show.
func (p *Poller) usual(c *poll) time.Duration {
	half := c.horizon.Sub(c.start) / 2
	return min(cmp.Or(c.longest, p.usualDetail, half), half)
}

// fits tells whether a detail view started now can end before the horizon.
func (p *Poller) fits(c *poll) bool {
	return time.Until(c.horizon)-handoffMargin(c.horizon.Sub(c.start)) >= p.usual(c)
}

// enqueue queues each id once per poll, even if a shifting list shows it twice.
func (p *Poller) enqueue(c *poll, ids []int64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, id := range ids {
		if !slices.Contains(c.subset, id) {
			c.subset = append(c.subset, id)
			c.queue = append(c.queue, id)
		}
	}
	c.poke()
}

// listIn keeps root's or a list's result; a location list read whole
// settles the subset drawn from it, and the locations that left it are forgotten.
func (p *Poller) listIn(c *poll, ep client.Endpoint, r client.ListResult) {
	p.mu.Lock()
	defer p.mu.Unlock()
	c.lists[ep] = r
	if r.IDErr != nil {
		// Entries without an integer id fail location_detail, not the list.
		c.detail.fail(0, r.IDErr)
	}
	if ep == client.EndpointLocations && !c.closed {
		if r.Err == nil {
			maps.DeleteFunc(p.checks, func(id int64, _ locationState) bool { return !slices.Contains(c.subset, id) })
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
	switch {
	case errors.Is(r.Err, client.ErrHeldOff):
		c.detail.fail(r.Status, r.Err)
		return
	case r.Err != nil && (r.Duration == 0 || p.cutShort(c, r)):
		return
	case r.Status > 0 && client.ReasonOf(r.Err) != client.ReasonTimeout:
		c.longest = max(c.longest, r.Duration) // only views answered in full tell how long answers take
	}
	ls := locationState{ID: id, Status: r.Status, Duration: r.Duration, Err: r.Err, Fields: r.Fields, Checked: end.Add(-r.Duration)}
	if old, ok := p.checks[id]; !ok || !old.Checked.After(ls.Checked) {
		p.checks[id] = ls
	}
	c.detail.add(start, end, r.Status, r.Err)
}

// cutShort tells whether a failed view was cut by the poll's end before its usual time.
func (p *Poller) cutShort(c *poll, r client.DetailResult) bool {
	if context.Cause(c.ctx) == nil || client.ReasonOf(r.Err) != client.ReasonTimeout {
		return false
	}
	return c.abandoned() || r.Duration < p.usual(c)
}

// abandoned tells whether the poll was cancelled by its scrapes leaving or a reload, not by a deadline.
func (c *poll) abandoned() bool {
	cause := context.Cause(c.ctx)
	return errors.Is(cause, errAbandoned) || errors.Is(cause, errDropped)
}

// count is a list's count, known once the list was read whole.
func (c *poll) count(ep client.Endpoint) Count {
	if r, ok := c.lists[ep]; ok && r.Err == nil {
		return Count{Value: r.Count, Known: true}
	}
	return Count{}
}

// snapshot turns what has arrived into a Snapshot; lists not yet in are too late.
func (p *Poller) snapshot(c *poll, now time.Time) *Snapshot {
	s := &Snapshot{
		Start: c.start, Duration: now.Sub(c.start), Endpoints: make(map[client.Endpoint]endpointState, 4),
		Projects: c.count(client.EndpointProjects), Locations: c.count(client.EndpointLocations), trace: c.trace,
		budget: c.horizon.Sub(c.start),
	}
	for _, ep := range upEndpoints {
		s.Endpoints[ep] = endpointState{Duration: s.Duration, Err: errTooLate}
		if r, ok := c.lists[ep]; ok {
			s.Endpoints[ep] = endpointState{Status: r.Status, Duration: r.Duration, Err: r.Err}
		}
	}
	// The subset: the ids given, else those of the list read whole, else those met so far and those checked before.
	ids := p.target.DetailIDs
	if len(ids) == 0 && s.Locations.Known {
		ids = c.subset
	} else if len(ids) == 0 {
		ids = slices.Compact(slices.Sorted(slices.Values(append(slices.Collect(maps.Keys(p.checks)), c.subset...))))
	}
	s.Details = p.view(ids)
	unchecked := endpointState{Err: errNoDetail} // location_detail in a poll that checked no view
	if until, status := p.target.Client.HoldOff(); now.Before(until) {
		s.HoldOffUntil, unchecked = until, endpointState{Status: status, Err: client.ErrHeldOff}
	}
	switch d := &c.detail; {
	case !d.firstStart.IsZero() || d.err != nil:
		s.Endpoints[client.EndpointLocationDetail] = endpointState{Status: d.status(), Duration: d.lastEnd.Sub(d.firstStart), Err: d.err}
	case len(ids) > 0 || p.target.wantsDetails() && !s.Locations.Known:
		s.Endpoints[client.EndpointLocationDetail] = unchecked
	}
	return s
}

// view returns the last checks of those of ids that have one, sorted by id.
func (p *Poller) view(ids []int64) []locationState {
	var out []locationState
	for _, id := range slices.Sorted(slices.Values(ids)) {
		if ls, ok := p.checks[id]; ok {
			out = append(out, ls)
		}
	}
	return out
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
	d.err = cmp.Or(d.err, err)
}

func (d *detailSummary) status() int {
	if d.err != nil {
		return d.failedStatus
	}
	return http.StatusOK
}

func maxTime(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}
