package collector

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net/url"
	"slices"
	"sync"
	"time"

	"github.com/deployment-service/deployment_service_exporter/client"
)

// Target is one watched service and what to read from it.
type Target struct {
	Client      Service
	DetailIDs   []int64 // the detail subset; without them, the list's first DetailLimit
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
	cfg := s.Client
	cfg.BaseURL = base
	c, err := client.New(cfg)
	if err != nil {
		return nil, err
	}
	opts.Timeout, opts.MinInterval = s.Timeout, s.MinInterval
	t := &Target{Client: c, DetailIDs: uniqueIDs(s.DetailIDs), DetailLimit: s.DetailLimit, InfoFields: s.InfoFields}
	return NewPoller(t, opts), nil
}

// uniqueIDs drops repeated ids, keeping the first of each: one location, one set of series.
func uniqueIDs(ids []int64) []int64 {
	seen := make(map[int64]bool, len(ids))
	return slices.DeleteFunc(slices.Clone(ids), func(id int64) bool {
		dup := seen[id]
		seen[id] = true
		return dup
	})
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

	mu                 sync.Mutex
	call               *poll // in flight
	last               *Snapshot
	seq, lastSeq       uint64                  // polls numbered as they start
	checks             map[int64]locationState // each subset location's last check
	usualDetail        time.Duration           // the longest detail view of the last poll that had one
	heldEnd, heldUntil time.Time               // until when last, a held-off poll, is shared; the hold-off logged
	stopped, throttled bool
	failures           failureLog
}

func NewPoller(t *Target, opts PollerOptions) *Poller {
	opts.Logger = cmp.Or(opts.Logger, slog.New(slog.DiscardHandler))
	opts.Timeout = cmp.Or(max(opts.Timeout, 0), 10*time.Second)
	return &Poller{target: t, opts: opts, sem: make(chan struct{}, max(t.Client.Concurrency(), 1)), checks: make(map[int64]locationState)}
}

func (t *Target) wantsDetails() bool { return len(t.DetailIDs) > 0 || t.DetailLimit > 0 }

// idsFromList is how many ids of the location list make the detail subset.
func (t *Target) idsFromList() int {
	if len(t.DetailIDs) > 0 {
		return 0
	}
	return t.DetailLimit
}

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
		s.HoldOffUntil, p.heldEnd = until, now.Add(min(max(budget, fairBudget), until.Sub(now)))
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
			lists: make(map[client.Endpoint]client.ListResult, 3), closed: p.target.idsFromList() == 0, subset: make(map[int64]bool),
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
	timer := time.NewTimer(time.Until(handoff))
	defer timer.Stop()
	cause := fmt.Errorf("the poll reached its deadline, set by %s: %w", by, context.DeadlineExceeded)
	select {
	case <-c.done:
		return c.snap
	case <-timer.C:
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

// finish keeps what c found, logs it and the hold-off's run, counts it unless its caller cut it short, and hands it over.
func (p *Poller) finish(c *poll) {
	p.mu.Lock()
	now := time.Now()
	snap := p.snapshot(c, now)
	abandoned := c.abandoned()
	if !errors.Is(context.Cause(c.ctx), context.DeadlineExceeded) && len(c.queue) == 0 { // views left for lack of time cut it too
		snap.budget = 0
	}
	if p.call == c {
		p.call = nil
	}
	if !abandoned && c.seq > p.lastSeq {
		kept := *snap
		kept.trace = nil
		p.last, p.lastSeq = &kept, c.seq
	}
	p.usualDetail = cmp.Or(c.longest, p.usualDetail)
	cut := abandoned || c.horizon.Sub(c.start) < min(p.opts.Timeout, fairBudget)
	until, status := p.target.Client.HoldOff()
	held, was, again := until.After(now), p.throttled, !until.Equal(p.heldUntil)
	p.throttled, p.heldUntil = held, until
	dropped := errors.Is(context.Cause(c.ctx), errDropped) // a reload cancelled it: no poll of the pair
	c.snap = snap
	p.mu.Unlock()
	if abandoned {
		p.opts.Logger.Debug("Poll abandoned: every scrape waiting for it gave up")
	} else {
		p.failures.log(p.opts.Logger, snap)
	}
	switch when := until.UTC().Format(time.RFC3339); {
	case held && !was:
		p.opts.Logger.Warn("The service asked to hold off: no requests until then", "status", status, "until", when)
	case held && again:
		p.opts.Logger.Debug("The service asked again to hold off", "status", status, "until", when)
	case !held && was:
		p.opts.Logger.Info("The service no longer asks to hold off")
	}
	outOfTime := !slices.ContainsFunc(upEndpoints, func(ep client.Endpoint) bool {
		err := snap.Endpoints[ep].Err
		return err != nil && !errors.Is(err, errTooLate) && client.ReasonOf(err) != client.ReasonTimeout
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

// takeLocations carries over the checks of a poller that a reload replaced.
func (p *Poller) takeLocations(old *Poller) {
	old.mu.Lock()
	checks := maps.Clone(old.checks)
	old.mu.Unlock()
	if !p.target.wantsDetails() || !slices.Equal(p.target.InfoFields, old.target.InfoFields) {
		return
	}
	if ids := p.target.DetailIDs; len(ids) > 0 {
		maps.DeleteFunc(checks, func(id int64, _ locationState) bool { return !slices.Contains(ids, id) })
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.checks = checks
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
