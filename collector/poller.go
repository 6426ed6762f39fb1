package collector

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/deployment-service/deployment_service_exporter/client"
)

// Target is one watched service and what to read from it.
type Target struct {
	Client      Service
	DetailIDs   []int64 // the detail subset, or else the list's first DetailLimit (never both, as the flags and file check)
	DetailLimit int
	InfoFields  []string // detail view fields exposed as info labels
}

// Service is what a poll reads: a *client.Client, or a fake in tests.
type Service interface {
	Root(ctx context.Context) client.Result
	Projects(ctx context.Context) client.ListResult
	Locations(ctx context.Context, wantIDs int, onIDs func([]int64)) client.ListResult
	LocationDetail(ctx context.Context, id int64, fields []string) client.DetailResult
	HoldOff() (until time.Time, status int)
	Concurrency() int
	RateLimited() bool
	Close()
}

// TargetSettings is what a poll of one service needs besides its URL: the flags, or a module of the file.
type TargetSettings struct {
	Client               client.Config // BaseURL left empty
	DetailIDs            []int64
	DetailLimit          int
	InfoFields           []string
	Timeout, MinInterval time.Duration
}

// NewTargetPoller builds the client and poller for the service at base.
func NewTargetPoller(base *url.URL, s TargetSettings, opts PollerOptions) (*Poller, error) {
	s.Client.BaseURL = base
	c, err := client.New(s.Client)
	if err != nil {
		return nil, err
	}
	opts.Timeout, opts.MinInterval = s.Timeout, s.MinInterval
	return NewPoller(&Target{Client: c, DetailIDs: s.DetailIDs, DetailLimit: s.DetailLimit, InfoFields: s.InfoFields}, opts), nil
}

var (
	errTooLate   = errors.New("poll did not finish before the scrape deadline")
	errAbandoned = fmt.Errorf("every scrape waiting for the poll gave up: %w", context.Canceled)
	errDropped   = fmt.Errorf("a reload dropped the target or changed its module: %w", context.Canceled)
	errNoDetail  = errors.New("no detail view was checked in this poll")
)

// fairBudget is the least time a poll needs: one cut sooner by lack of time alone is not counted.
const fairBudget = time.Second

type scrapeTimeoutKey struct{}

// PollerOptions tunes a Poller; Recent, when set, records every poll under Name (the redacted base URL) and Module.
type PollerOptions struct {
	Timeout      time.Duration // bounds a poll, which ends at the latest waiting scrape's deadline
	MinInterval  time.Duration // the least time between two polls' starts; 0 polls every scrape
	Logger       *slog.Logger
	Recent       *PollLog
	Name, Module string
	Polls        *TargetStats // counts polls, however many scrapes shared each
	TimeoutName  string       // such as "--api.timeout"
	AfterPoll    func()       // called once a poll's requests have all ended, before it answers
}

// Poller shares one target's poll in flight as singleflight shares a call, and keeps its last poll and hold-off.
type Poller struct {
	target *Target
	opts   PollerOptions
	sem    chan struct{} // a slot for each call in flight

	mu           sync.Mutex
	call         *poll // in flight
	last         *Snapshot
	seq, lastSeq uint64                  // polls numbered as they start
	checks       map[int64]locationState // each subset location's last check
	usualDetail  time.Duration           // the longest detail view of the last poll that had one
	heldEnd      time.Time               // until when last, a held-off poll, is shared
	stopped      bool
	failures     failureLog
}

func NewPoller(t *Target, opts PollerOptions) *Poller {
	opts.Logger = cmp.Or(opts.Logger, slog.New(slog.DiscardHandler))
	opts.Timeout = cmp.Or(max(opts.Timeout, 0), 10*time.Second)
	return &Poller{target: t, opts: opts, sem: make(chan struct{}, max(t.Client.Concurrency(), 1)), checks: make(map[int64]locationState)}
}

func (t *Target) wantsDetails() bool { return len(t.DetailIDs) > 0 || t.DetailLimit > 0 }

// Poll returns a snapshot for one scrape by ctx's deadline; a joined poll runs on until it too.
func (p *Poller) Poll(ctx context.Context) *Snapshot {
	now := time.Now()
	own, _ := p.horizon(ctx, now.Add(p.opts.Timeout))
	p.mu.Lock()
	if p.stopped {
		defer p.mu.Unlock()
		return p.failed(now, 0, errDropped)
	}
	budget := own.Sub(now) // a poll its deadline cut serves only scrapes with about its budget
	inInterval := p.last != nil && p.opts.MinInterval > 0 && now.Sub(p.last.Start) < p.opts.MinInterval && (p.last.budget == 0 || p.last.budget >= budget-budget/20)
	if inInterval || now.Before(p.heldEnd) {
		defer p.mu.Unlock()
		s := *p.last
		if !now.Before(s.HoldOffUntil) {
			s.HoldOffUntil = time.Time{}
		}
		return &s
	}
	if until, status := p.target.Client.HoldOff(); p.call == nil && now.Before(until) {
		s := p.failed(now, status, client.ErrHeldOff)
		p.heldEnd = now.Add(min(max(budget, fairBudget), until.Sub(now)))
		p.seq++
		p.last, p.lastSeq = s, p.seq
		p.mu.Unlock()
		p.report(s, true)
		return s
	}
	if p.call == nil {
		p.seq++
		p.call = &poll{
			start: now, seq: p.seq, horizon: now, trace: &client.Trace{}, wake: make(chan struct{}, 1), done: make(chan struct{}),
			lists: make(map[client.Endpoint]client.ListResult, 3), closed: p.target.DetailLimit == 0, subset: make(map[int64]bool),
		}
		p.call.ctx, p.call.cancel = context.WithCancelCause(client.WithTrace(context.WithoutCancel(ctx), p.call.trace))
		go p.run(p.call)
	}
	c := p.call
	c.waiters++
	deadline, by := p.horizon(ctx, c.start.Add(p.opts.Timeout))
	if deadline.After(c.horizon) {
		c.horizon = deadline
		c.poke()
	}
	p.mu.Unlock()
	return p.wait(ctx, c, deadline.Add(-handoffMargin(deadline.Sub(c.start))), by)
}

// wait waits for c until handoff; the last scrape to leave ends the poll and takes what it found.
func (p *Poller) wait(ctx context.Context, c *poll, handoff time.Time, by string) *Snapshot {
	cause := fmt.Errorf("the poll reached its deadline, set by %s: %w", by, context.DeadlineExceeded)
	select {
	case <-c.done:
		return c.snap
	case <-time.After(time.Until(handoff)):
	case <-ctx.Done():
		if !errors.Is(ctx.Err(), context.DeadlineExceeded) {
			cause = errAbandoned
		}
	}
	p.mu.Lock()
	c.waiters--
	last := c.waiters == 0
	if last && c.snap == nil {
		c.cancel(cause)
		p.call = nil
	}
	p.mu.Unlock()
	if last {
		select {
		case <-c.done:
			return c.snap
		case <-ctx.Done():
		}
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.snapshot(c, time.Now())
}

// finish keeps what c found, logs it, counts it unless its caller cut it short, and hands it over.
func (p *Poller) finish(c *poll) {
	p.mu.Lock()
	snap := p.snapshot(c, time.Now())
	abandoned := c.abandoned()
	if !errors.Is(context.Cause(c.ctx), context.DeadlineExceeded) && len(c.queue) == 0 { // views left for lack of time cut it too
		snap.budget = 0
	}
	if p.call == c {
		p.call = nil
	}
	if !abandoned && c.seq > p.lastSeq {
		kept := *snap
		kept.trace = &client.Trace{} // the requests are in its record
		p.last, p.lastSeq = &kept, c.seq
	}
	p.usualDetail = cmp.Or(c.longest, p.usualDetail)
	cut := abandoned || c.horizon.Sub(c.start) < min(p.opts.Timeout, fairBudget)
	dropped := errors.Is(context.Cause(c.ctx), errDropped) // a reload cancelled it: no poll of the pair
	c.snap = snap
	p.mu.Unlock()
	if abandoned {
		p.opts.Logger.Debug("Poll abandoned: every scrape waiting for it gave up")
	} else {
		p.failures.log(p.opts.Logger, snap)
	}
	outOfTime := !slices.ContainsFunc(upEndpoints, func(ep client.Endpoint) bool {
		err := snap.Endpoints[ep].Err
		return err != nil && client.ReasonOf(err) != client.ReasonTimeout
	})
	p.report(snap, !dropped && (!cut || snap.up() || !outOfTime))
	close(c.done)
}

func (p *Poller) horizon(ctx context.Context, limit time.Time) (time.Time, string) {
	if deadline, ok := ctx.Deadline(); ok && deadline.Before(limit) {
		if h, _ := ctx.Value(scrapeTimeoutKey{}).(string); h != "" {
			return deadline, fmt.Sprintf("the scrape timeout of %ss (X-Prometheus-Scrape-Timeout-Seconds, less a margin to answer)", h)
		}
		return deadline, "the scrape's deadline"
	}
	return limit, fmt.Sprintf("%s=%s", p.opts.TimeoutName, p.opts.Timeout)
}

// takeLocations carries over, to a poller not yet in use, the checks of the one that a reload replaced.
func (p *Poller) takeLocations(old *Poller) {
	if !p.target.wantsDetails() || !slices.Equal(p.target.InfoFields, old.target.InfoFields) {
		return
	}
	old.mu.Lock()
	p.checks = maps.Clone(old.checks)
	old.mu.Unlock()
	if ids := p.target.DetailIDs; len(ids) > 0 {
		maps.DeleteFunc(p.checks, func(id int64, _ locationState) bool { return !slices.Contains(ids, id) })
	}
}

func (p *Poller) stop() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.stopped = true
	if p.call != nil {
		p.call.cancel(errDropped)
	}
	p.call = nil
}

func (p *Poller) report(s *Snapshot, count bool) {
	if count && p.opts.Polls != nil {
		p.opts.Polls.ObservePoll(s.up())
	}
	if p.opts.Recent != nil {
		p.opts.Recent.Add(newPollRecord(p.opts.Name, p.opts.Module, s))
	}
}

// handoffMargin leaves the last scrape time to take what a poll it ends has found.
func handoffMargin(budget time.Duration) time.Duration {
	return min(max(budget/20, 5*time.Millisecond), 50*time.Millisecond)
}

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
		r := api.Locations(c.ctx, t.DetailLimit, func(ids []int64) { p.enqueue(c, ids) })
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
	c.failDetail(0, r.IDErr) // entries without an integer id fail location_detail, not the list; nil changes nothing
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
	ls := locationState{DetailResult: r, ID: id, Checked: end.Add(-r.Duration)}
	if !p.checks[id].Checked.After(ls.Checked) { // a check missing is the zero time
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
		Start: c.start, Duration: now.Sub(c.start), Endpoints: make(map[client.Endpoint]client.Result, 4), trace: c.trace, budget: c.horizon.Sub(c.start),
	}
	counts := make(map[client.Endpoint]Count, 3) // a list not read whole has no count
	for _, ep := range upEndpoints {
		s.Endpoints[ep] = client.Result{Duration: s.Duration, Err: &client.Error{Endpoint: ep, Reason: client.ReasonTimeout, Err: errTooLate}}
		if r, ok := c.lists[ep]; ok {
			s.Endpoints[ep], counts[ep] = r.Result, Count{Value: r.Count, Known: r.Err == nil}
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
	for _, id := range slices.Compact(slices.Sorted(slices.Values(ids))) { // an id given twice is one location
		if ls, ok := p.checks[id]; ok {
			s.Details = append(s.Details, ls)
		}
	}
	unchecked := client.Result{Err: errNoDetail}
	if until, status := p.target.Client.HoldOff(); now.Before(until) {
		s.HoldOffUntil, unchecked = until, client.Result{Status: status, Err: client.ErrHeldOff}
	}
	switch {
	case c.detailErr != nil:
		s.Endpoints[client.EndpointLocationDetail] = client.Result{Status: c.detailStatus, Duration: c.detailEnd.Sub(c.detailStart), Err: c.detailErr}
	case !c.detailStart.IsZero():
		s.Endpoints[client.EndpointLocationDetail] = client.Result{Status: http.StatusOK, Duration: c.detailEnd.Sub(c.detailStart)}
	case len(ids) > 0 || p.target.wantsDetails() && !s.Locations.Known:
		s.Endpoints[client.EndpointLocationDetail] = unchecked
	}
	return s
}

// failed is a poll that sent nothing: the lists are down, the subset keeps its last checks.
func (p *Poller) failed(now time.Time, status int, err error) *Snapshot {
	c := &poll{start: now, horizon: now, trace: &client.Trace{}, lists: make(map[client.Endpoint]client.ListResult, 3)}
	for _, ep := range upEndpoints {
		c.lists[ep] = client.ListResult{Result: client.Result{Status: status, Err: err}}
	}
	return p.snapshot(c, now)
}

// Snapshot is what one poll of the API found, as plain values.
type Snapshot struct {
	Start               time.Time
	Duration            time.Duration
	Endpoints           map[client.Endpoint]client.Result // how each endpoint answered
	Projects, Locations Count
	Details             []locationState // each subset location's last check, by this poll or an earlier one
	HoldOffUntil        time.Time       // the end of the hold-off in force; zero if none

	trace  *client.Trace // the poll's requests; empty once kept for later scrapes
	budget time.Duration // of a poll that its deadline cut short; 0 for one that ended on its own
}

// Count is a list count; Known is false when the list could not be read.
type Count struct {
	Value int64
	Known bool
}

type locationState struct {
	client.DetailResult
	ID      int64
	Checked time.Time
}

var upEndpoints = []client.Endpoint{client.EndpointRoot, client.EndpointProjects, client.EndpointLocations}

func (s *Snapshot) up() bool {
	return !slices.ContainsFunc(upEndpoints, func(ep client.Endpoint) bool {
		st, ok := s.Endpoints[ep]
		return !ok || st.Err != nil
	})
}
