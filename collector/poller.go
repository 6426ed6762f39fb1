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

// errTooLate stands for endpoints whose results did not arrive before the
// scrape had to answer.
var errTooLate = errors.New("poll did not finish before the scrape deadline")

// errAbandoned ends a poll that every scrape gave up on.
var errAbandoned = fmt.Errorf("every scrape waiting for the poll gave up: %w", context.Canceled)

// errDropped ends the polls of a target that a reload dropped from its
// module, or whose module it changed.
var errDropped = fmt.Errorf("a reload dropped the target or changed its module: %w", context.Canceled)

// fairBudget is the least time a poll needs to say anything of the
// service; a poll cut sooner by lack of time alone is not counted.
const fairBudget = time.Second

// deadlineError ends a poll at its deadline, naming the limit that set it;
// it wraps context.DeadlineExceeded, so what it cuts is a timeout.
type deadlineError struct{ limit string }

func (e *deadlineError) Error() string {
	return "the poll reached its deadline, set by " + e.limit
}

func (e *deadlineError) Unwrap() error { return context.DeadlineExceeded }

type scrapeTimeoutKey struct{}

// WithScrapeTimeout marks ctx's deadline as set by the scrape timeout
// header, so that a poll cut by it can say so.
func WithScrapeTimeout(ctx context.Context, header string) context.Context {
	return context.WithValue(ctx, scrapeTimeoutKey{}, header)
}

// PollerOptions tunes a Poller.
type PollerOptions struct {
	// Timeout bounds a poll: it ends at the latest waiting scrape's
	// deadline, and never later than Timeout after it started.
	Timeout time.Duration
	// MinInterval is the least time between the starts of two polls; a
	// scrape inside it is answered from the last poll. 0 polls every scrape.
	MinInterval time.Duration
	Logger      *slog.Logger
	// Recent, when set, keeps a record of every poll, under Name (the
	// redacted base URL) and Module.
	Recent *PollLog
	Name   string
	Module string
	// Polls, when set, counts the polls and those that failed.
	Polls PollObserver
	// TimeoutName names the setting behind Timeout in messages, such as
	// "--api.timeout"; "timeout" when empty.
	TimeoutName string
}

// PollObserver counts polls: one per poll, however many scrapes shared
// it, held-off ones included; up is deployment_service_up after it.
type PollObserver interface {
	ObservePoll(up bool)
}

// Poller owns time for one target: it shares a poll in flight between
// concurrent scrapes, answers from the last poll inside the minimum
// interval, and sends nothing while the service asked it to hold off.
type Poller struct {
	target *Target
	opts   PollerOptions
	// book keeps each location's last check across polls.
	book *locationBook

	mu       sync.Mutex
	inflight *pollCall
	last     *Snapshot
	// seq numbers the polls as they start; lastSeq is the last one's.
	seq, lastSeq uint64
	// stopped tells that the target was dropped: nothing is polled any more.
	stopped bool
	// throttled and heldUntil tell the last hold-off, logged once a run.
	throttled bool
	heldUntil time.Time
	// failures logs a lasting failure when it starts, changes or ends.
	failures failureLog
}

// pollCall is one poll in flight and the scrapes waiting for it. Its
// fields other than run and done are guarded by the Poller's mu.
type pollCall struct {
	seq     uint64
	run     *pollRun
	done    chan struct{}
	snap    *Snapshot
	waiters int
	cancel  context.CancelCauseFunc
	// The poll runs until its last scrape leaves, by limit at the latest;
	// horizon is the latest deadline among its scrapes.
	start, horizon, limit time.Time
	// held: a hold-off was in force; snap is ready and shared until heldEnd.
	held    bool
	heldEnd time.Time
}

// NewPoller returns a Poller for t.
func NewPoller(t *Target, opts PollerOptions) *Poller {
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.Timeout <= 0 {
		opts.Timeout = 10 * time.Second
	}
	return &Poller{target: t, opts: opts, book: newLocationBook()}
}

// Poll returns a snapshot for one scrape, by the time ctx is done at the
// latest. It joins the poll in flight if there is one, which then runs on
// until this scrape's deadline too: sharing a poll never shortens a
// scrape's budget. The last scrape to leave ends the poll.
func (p *Poller) Poll(ctx context.Context) *Snapshot {
	now := time.Now()
	p.mu.Lock()
	if p.stopped {
		p.mu.Unlock()
		return failedSnapshot(now, p.target, p.book, 0, errDropped)
	}
	if p.last != nil && p.opts.MinInterval > 0 && now.Sub(p.last.Start) < p.opts.MinInterval && p.last.reusableFor(p.budget(ctx)) {
		last := p.last.at(now)
		p.mu.Unlock()
		return last
	}
	c := p.inflight
	started := c == nil || c.held && !now.Before(c.heldEnd)
	if started {
		c = p.start(ctx, now)
	}
	if c.held {
		p.mu.Unlock()
		if started {
			p.countPoll(c.snap)
			p.record(c.snap)
		}
		return c.snap.at(now)
	}
	c.waiters++
	horizon, by := p.horizon(c, ctx)
	if horizon.After(c.horizon) {
		c.horizon = horizon
		c.run.setBudget(horizon.Sub(c.start))
	}
	p.mu.Unlock()
	return p.wait(ctx, c, horizon, by)
}

// wait waits for c on behalf of one scrape until a little before its
// horizon, which by names. A scrape that has to answer first takes what
// has arrived; the last one to leave ends the poll.
func (p *Poller) wait(ctx context.Context, c *pollCall, horizon time.Time, by string) *Snapshot {
	timer := time.NewTimer(time.Until(horizon) - handoffMargin(horizon.Sub(c.start)))
	defer timer.Stop()
	select {
	case <-c.done:
		return c.snap
	case <-timer.C:
		if p.leave(c, &deadlineError{limit: by}) {
			// What is still out ends as a timeout within the margin.
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
	return c.run.snapshot()
}

// start begins a poll; p.mu is held. The poll does not inherit the
// scrape's cancellation: its scrapes end it when they leave.
func (p *Poller) start(ctx context.Context, now time.Time) *pollCall {
	p.seq++
	c := &pollCall{seq: p.seq, start: now, limit: now.Add(p.opts.Timeout)}
	c.horizon, _ = p.horizon(c, ctx)
	if until, status := p.target.Client.HoldOff(); now.Before(until) {
		p.holdOff(c, until, status)
		return c
	}
	pctx, cancel := context.WithCancelCause(context.WithoutCancel(ctx))
	// Every poll is traced, so that the debug views can show any of them.
	trace := &client.Trace{}
	pctx = client.WithTrace(pctx, trace)
	c.done, c.cancel = make(chan struct{}), cancel
	c.run = newPollRun(pctx, p.target, p.book, trace, c.horizon.Sub(now))
	p.inflight = c
	go func() {
		defer cancel(nil)
		p.finish(c, c.run.run())
	}()
	return c
}

// holdOff makes c a poll that sends nothing because the service asked to
// hold off until the given time; p.mu is held. It is shared for a second
// at least, so that scrapes with no time to spare cannot count one each.
func (p *Poller) holdOff(c *pollCall, until time.Time, status int) {
	p.opts.Logger.Debug("Holding off the service", "until", until, "status", status)
	s := failedSnapshot(c.start, p.target, p.book, status, client.ErrHeldOff)
	s.HoldOffUntil = until
	c.held, c.snap = true, s
	c.heldEnd = c.start.Add(min(max(c.horizon.Sub(c.start), fairBudget), until.Sub(c.start)))
	p.inflight = c
	p.last, p.lastSeq = s, c.seq
}

// finish keeps what poll c found, counts it unless its caller cut it
// short, and hands it to the scrapes waiting.
func (p *Poller) finish(c *pollCall, snap *Snapshot) {
	abandoned := c.run.abandoned()
	if abandoned {
		p.opts.Logger.Debug("Poll abandoned: every scrape waiting for it gave up")
	} else {
		p.failures.log(p.opts.Logger, snap)
	}
	p.mu.Lock()
	if p.inflight == c {
		p.inflight = nil
	}
	// Neither an abandoned poll nor one older than the last is kept.
	if !abandoned && c.seq > p.lastSeq {
		// Kept without its trace: the recent-polls log holds a copy.
		kept := *snap
		kept.trace = nil
		p.last, p.lastSeq = &kept, c.seq
	}
	c.snap = snap
	cut := abandoned || c.horizon.Before(c.limit) && c.horizon.Sub(c.start) < fairBudget
	p.mu.Unlock()
	p.logHoldOff()
	// A poll cut short by its caller measured the caller, not the service.
	if !cut || snap.up() || !snap.onlyOutOfTime() {
		p.countPoll(snap)
	}
	p.record(snap)
	close(c.done)
}

// leave drops one waiter from c; the last one ends the poll with cause
// and reports true. A poll that a deadline ends stays worth keeping: what
// it cuts short is a timeout.
func (p *Poller) leave(c *pollCall, cause error) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	c.waiters--
	if c.waiters > 0 {
		return false
	}
	if errors.Is(cause, context.DeadlineExceeded) {
		c.run.settle()
	} else {
		c.run.abandon()
	}
	c.cancel(cause)
	// A scrape arriving now starts a poll of its own.
	if p.inflight == c {
		p.inflight = nil
	}
	return true
}

// horizon is the time until which the scrape of ctx may wait for c: its
// deadline, bounded by c's limit. It also names what set it.
func (p *Poller) horizon(c *pollCall, ctx context.Context) (time.Time, string) {
	if deadline, ok := ctx.Deadline(); ok && deadline.Before(c.limit) {
		if h, ok := ctx.Value(scrapeTimeoutKey{}).(string); ok {
			return deadline, fmt.Sprintf("the scrape timeout of %ss (X-Prometheus-Scrape-Timeout-Seconds, less a margin to answer)", h)
		}
		return deadline, "the scrape's deadline"
	}
	name := p.opts.TimeoutName
	if name == "" {
		name = "timeout"
	}
	return c.limit, fmt.Sprintf("%s=%s", name, p.opts.Timeout)
}

// budget is the time a poll started now for ctx may take.
func (p *Poller) budget(ctx context.Context) time.Duration {
	if deadline, ok := ctx.Deadline(); ok {
		return min(time.Until(deadline), p.opts.Timeout)
	}
	return p.opts.Timeout
}

// logHoldOff logs, after a poll, when a run of hold-offs begins (warn,
// once), is asked again (debug) and ends (info).
func (p *Poller) logHoldOff() {
	until, status := p.target.Client.HoldOff()
	p.mu.Lock()
	held := until.After(time.Now())
	begins, again, ends := held && !p.throttled, held && p.throttled && !until.Equal(p.heldUntil), !held && p.throttled
	p.throttled = held
	if held {
		p.heldUntil = until
	}
	p.mu.Unlock()
	when := until.UTC().Format(time.RFC3339)
	switch {
	case begins:
		p.opts.Logger.Warn("The service asked to hold off: no requests until then", "status", status, "until", when)
	case again:
		p.opts.Logger.Debug("The service asked again to hold off", "status", status, "until", when)
	case ends:
		p.opts.Logger.Info("The service no longer asks to hold off")
	}
}

// keptLocations is what a reload keeps of a replaced poller: its location
// checks, and the info fields they were made with.
type keptLocations struct {
	book       *locationBook
	infoFields []string
}

func (p *Poller) keptLocations() keptLocations {
	return keptLocations{book: p.book, infoFields: p.target.InfoFields}
}

// takeLocations carries over the checks a replaced poller of the same
// target kept, of locations still in the subset and with the same info fields.
func (p *Poller) takeLocations(old keptLocations) {
	if !p.target.wantsDetails() || !slices.Equal(p.target.InfoFields, old.infoFields) {
		return
	}
	b := old.book
	if len(p.target.DetailIDs) > 0 {
		keep := make(map[int64]bool, len(p.target.DetailIDs))
		for _, id := range p.target.DetailIDs {
			keep[id] = true
		}
		b.keepOnly(keep)
	}
	// Subsets drawn from the list are trimmed by the next poll's list.
	p.book = b
}

// stop ends the poller for good, as a reload that drops its target does:
// the poll in flight is cancelled, and no other starts.
func (p *Poller) stop() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.stopped = true
	if c := p.inflight; c != nil && !c.held {
		c.run.abandon()
		c.cancel(errDropped)
	}
	p.inflight = nil
}

// countPoll counts a poll that has ended, held off or not.
func (p *Poller) countPoll(s *Snapshot) {
	if p.opts.Polls != nil {
		p.opts.Polls.ObservePoll(s.up())
	}
}

// record keeps s in the recent-polls log, if there is one.
func (p *Poller) record(s *Snapshot) {
	if p.opts.Recent != nil {
		p.opts.Recent.Add(newPollRecord(p.opts.Name, p.opts.Module, s))
	}
}

// handoffMargin is how much earlier than the scrape's deadline a poll
// ends: enough to assemble the snapshot and hand it over.
func handoffMargin(budget time.Duration) time.Duration {
	return min(max(budget/20, 5*time.Millisecond), 50*time.Millisecond)
}
