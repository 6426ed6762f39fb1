package collector

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/deployment-service/deployment_service_exporter/client"
)

var (
	// errTooLate stands for endpoints whose results came after the scrape had to answer.
	errTooLate   = errors.New("poll did not finish before the scrape deadline")
	errAbandoned = fmt.Errorf("every scrape waiting for the poll gave up: %w", context.Canceled)
	errDropped   = fmt.Errorf("a reload dropped the target or changed its module: %w", context.Canceled)
	errNoDetail  = errors.New("no detail view was checked in this poll")
)

// fairBudget is the least time a poll needs to say anything of the service;
// a poll cut sooner by lack of time alone is not counted.
const fairBudget = time.Second

// deadlineError ends a poll at its deadline, naming the limit that set it.
type deadlineError struct{ limit string }

func (e *deadlineError) Error() string { return "the poll reached its deadline, set by " + e.limit }

func (e *deadlineError) Unwrap() error { return context.DeadlineExceeded }

type scrapeTimeoutKey struct{}

// WithScrapeTimeout marks ctx's deadline as set by the scrape timeout header.
func WithScrapeTimeout(ctx context.Context, header string) context.Context {
	return context.WithValue(ctx, scrapeTimeoutKey{}, header)
}

// PollerOptions tunes a Poller. Recent, when set, records every poll under
// Name (the redacted base URL) and Module.
type PollerOptions struct {
	Timeout     time.Duration // bounds a poll, which ends at the latest waiting scrape's deadline
	MinInterval time.Duration // the least time between two polls' starts; 0 polls every scrape
	Logger      *slog.Logger
	Recent      *PollLog
	Name        string
	Module      string
	Polls       pollCounter // counts polls, however many scrapes shared each
	TimeoutName string      // such as "--api.timeout"
}

// pollCounter counts polls; up is deployment_service_up after each.
type pollCounter interface{ ObservePoll(up bool) }

// Poller owns time for one target: it shares a poll in flight between scrapes,
// reuses the last one inside the minimum interval, and honours hold-offs.
type Poller struct {
	target *Target
	opts   PollerOptions
	book   *locationBook

	mu           sync.Mutex
	inflight     *pollRun
	last         *Snapshot
	seq, lastSeq uint64    // polls numbered as they start
	heldEnd      time.Time // until when last, a held-off poll, is shared
	stopped      bool
	throttled    bool // in a run of hold-offs, logged once
	heldUntil    time.Time
	failures     failureLog
}

// NewPoller returns a Poller for t.
func NewPoller(t *Target, opts PollerOptions) *Poller {
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.Timeout <= 0 {
		opts.Timeout = 10 * time.Second
	}
	return &Poller{target: t, opts: opts, book: newLocationBook(t.InfoFields)}
}

// Poll returns a snapshot for one scrape by ctx's deadline. A joined poll runs
// on until this scrape's deadline too, so sharing never shortens a budget.
func (p *Poller) Poll(ctx context.Context) *Snapshot {
	now := time.Now()
	own, _ := p.horizon(ctx, now.Add(p.opts.Timeout))
	p.mu.Lock()
	if p.stopped {
		p.mu.Unlock()
		return failedSnapshot(now, p.target, p.book, 0, errDropped)
	}
	inInterval := p.last != nil && p.opts.MinInterval > 0 && now.Sub(p.last.Start) < p.opts.MinInterval && p.last.reusableFor(own.Sub(now))
	if inInterval || now.Before(p.heldEnd) {
		last := p.last.at(now)
		p.mu.Unlock()
		return last
	}
	c := p.inflight
	if c == nil {
		if until, status := p.target.Client.HoldOff(); now.Before(until) {
			s := p.holdOff(now, own, until, status)
			p.mu.Unlock()
			p.report(s, true)
			return s
		}
		c = p.start(ctx, now, own)
	}
	c.waiters++
	horizon, by := p.horizon(ctx, c.start.Add(p.opts.Timeout))
	if horizon.After(c.horizon) {
		c.horizon = horizon
		c.setBudget(horizon.Sub(c.start))
	}
	handoff := horizon.Add(-handoffMargin(horizon.Sub(c.start)))
	p.mu.Unlock()
	return p.wait(ctx, c, handoff, by)
}

// wait waits for c until handoff; the last scrape to leave ends the poll.
func (p *Poller) wait(ctx context.Context, c *pollRun, handoff time.Time, by string) *Snapshot {
	timer := time.NewTimer(time.Until(handoff))
	defer timer.Stop()
	select {
	case <-c.done:
		return c.snap
	case <-timer.C:
		if p.leave(c, &deadlineError{limit: by}) {
			select {
			case <-c.done:
				return c.snap
			case <-ctx.Done():
			}
		}
	case <-ctx.Done():
		cause := errAbandoned
		if errors.Is(ctx.Err(), context.DeadlineExceeded) {
			cause = &deadlineError{limit: by}
		}
		p.leave(c, cause)
	}
	return c.snapshot()
}

// start begins a poll, which its scrapes end when they leave; p.mu is held.
func (p *Poller) start(ctx context.Context, now, horizon time.Time) *pollRun {
	p.seq++
	c := newPollRun(ctx, p.target, p.book, now, horizon.Sub(now))
	c.seq, c.horizon, c.done = p.seq, horizon, make(chan struct{})
	p.inflight = c
	go func() { p.finish(c, c.run()) }()
	return c
}

// holdOff makes a poll that sends nothing until the hold-off ends; p.mu is held.
// It is shared for a second at least, so hurried scrapes cannot count one each.
func (p *Poller) holdOff(now, horizon, until time.Time, status int) *Snapshot {
	p.opts.Logger.Debug("Holding off the service", "until", until, "status", status)
	s := failedSnapshot(now, p.target, p.book, status, client.ErrHeldOff)
	s.HoldOffUntil = until
	p.heldEnd = now.Add(min(max(horizon.Sub(now), fairBudget), until.Sub(now)))
	p.seq++
	p.last, p.lastSeq = s, p.seq
	return s
}

// finish keeps what c found, counts it unless its caller cut it short, and hands it over.
func (p *Poller) finish(c *pollRun, snap *Snapshot) {
	abandoned := c.abandoned()
	if abandoned {
		p.opts.Logger.Debug("Poll abandoned: every scrape waiting for it gave up")
	} else {
		p.failures.log(p.opts.Logger, snap)
	}
	p.mu.Lock()
	if p.inflight == c {
		p.inflight = nil
	}
	if !abandoned && c.seq > p.lastSeq {
		kept := *snap
		kept.trace = nil
		p.last, p.lastSeq = &kept, c.seq
	}
	c.snap = snap
	cut := abandoned || c.horizon.Sub(c.start) < min(p.opts.Timeout, fairBudget)
	p.mu.Unlock()
	p.logHoldOff()
	p.report(snap, !cut || snap.up() || !snap.onlyOutOfTime())
	close(c.done)
}

// leave drops one waiter from c; the last one ends the poll with cause and reports true.
func (p *Poller) leave(c *pollRun, cause error) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	c.waiters--
	if c.waiters > 0 {
		return false
	}
	c.end(cause)
	if p.inflight == c {
		p.inflight = nil
	}
	return true
}

// horizon is ctx's deadline bounded by limit, and what set it.
func (p *Poller) horizon(ctx context.Context, limit time.Time) (time.Time, string) {
	if deadline, ok := ctx.Deadline(); ok && deadline.Before(limit) {
		if h, ok := ctx.Value(scrapeTimeoutKey{}).(string); ok {
			return deadline, fmt.Sprintf("the scrape timeout of %ss (X-Prometheus-Scrape-Timeout-Seconds, less a margin to answer)", h)
		}
		return deadline, "the scrape's deadline"
	}
	return limit, fmt.Sprintf("%s=%s", p.opts.TimeoutName, p.opts.Timeout)
}

// logHoldOff logs when a run of hold-offs begins, is asked again and ends.
func (p *Poller) logHoldOff() {
	until, status := p.target.Client.HoldOff()
	held := until.After(time.Now())
	p.mu.Lock()
	was, again := p.throttled, !until.Equal(p.heldUntil)
	p.throttled, p.heldUntil = held, until
	p.mu.Unlock()
	when := until.UTC().Format(time.RFC3339)
	switch {
	case held && !was:
		p.opts.Logger.Warn("The service asked to hold off: no requests until then", "status", status, "until", when)
	case held && again:
		p.opts.Logger.Debug("The service asked again to hold off", "status", status, "until", when)
	case !held && was:
		p.opts.Logger.Info("The service no longer asks to hold off")
	}
}

// keptLocations is what a reload keeps of a replaced poller.
func (p *Poller) keptLocations() *locationBook { return p.book }

// takeLocations carries over a replaced poller's checks still in the subset.
func (p *Poller) takeLocations(old *locationBook) {
	if !p.target.wantsDetails() || !slices.Equal(p.target.InfoFields, old.infoFields) {
		return
	}
	if ids := p.target.DetailIDs; len(ids) > 0 {
		old.keepOnly(func(id int64) bool { return slices.Contains(ids, id) })
	}
	p.book = old
}

// stop cancels the poll in flight for good, for a reload that drops the target.
func (p *Poller) stop() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.stopped = true
	if c := p.inflight; c != nil {
		c.end(errDropped)
	}
	p.inflight = nil
}

// report counts a poll unless told not to, and records it.
func (p *Poller) report(s *Snapshot, count bool) {
	if count && p.opts.Polls != nil {
		p.opts.Polls.ObservePoll(s.up())
	}
	if p.opts.Recent != nil {
		p.opts.Recent.Add(newPollRecord(p.opts.Name, p.opts.Module, s))
	}
}

// handoffMargin is how much before the scrape's deadline a poll hands over.
func handoffMargin(budget time.Duration) time.Duration {
	return min(max(budget/20, 5*time.Millisecond), 50*time.Millisecond)
}
