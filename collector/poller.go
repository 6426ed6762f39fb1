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

// The causes a poll's context ends with. The deadline's wraps
// context.DeadlineExceeded, so the client still classifies what it cut
// short as a timeout.
var errAbandoned = fmt.Errorf("every scrape waiting for the poll gave up: %w", context.Canceled)

// errDropped ends the polls of a target that a reload dropped from its
// module, or whose module it changed.
var errDropped = fmt.Errorf("a reload dropped the target or changed its module: %w", context.Canceled)

// fairBudget is the least time a poll needs to say anything of the
// service: a poll that a scrape's deadline cut sooner, with nothing failed
// but for lack of time, is not counted.
const fairBudget = time.Second

// deadlineError is the cause a poll ends with at its deadline. It names
// the limit that set the deadline, so that a timeout in a log line or on
// a page says which setting to change.
type deadlineError struct{ limit string }

func (e *deadlineError) Error() string {
	return "the poll reached its deadline, set by " + e.limit
}

func (e *deadlineError) Unwrap() error { return context.DeadlineExceeded }

type scrapeTimeoutKey struct{}

// WithScrapeTimeout returns a context whose deadline comes from the
// scrape timeout that Prometheus sent (the header's value, as sent), so
// that a poll cut by it can say so.
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
	// throttled tells that the service asked to hold off after the last
	// poll, and heldUntil until when: a run of hold-offs is logged once.
	throttled bool
	heldUntil time.Time
	// failures follows how the target's endpoints fail from poll to poll,
	// so that a lasting failure is logged when it starts, changes or ends.
	failures failureLog

	// Set by tests only: ranHook runs once a poll has gathered all its
	// results and before the poller keeps them; waitedHook as the last
	// result arrives, inside the poll; expireHook when the deadline
	// comes, before it settles the poll.
	ranHook, waitedHook, expireHook func()
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
	// The poll ends at end, which a timer enforces: the deadline of the
	// latest waiting scrape (its horizon) less the handoff margin, and
	// never later than limit, --api.timeout after the start. A context
	// deadline could not move; the timer can.
	start, horizon, end, limit time.Time
	timer                      *time.Timer
	// horizonBy names what set the horizon, for the deadline's error.
	horizonBy string
	// held tells that a hold-off was in force: the poll sends nothing, its
	// snap is ready at once, and it stays in flight for the scrapes that
	// come until its horizon (fairBudget at least) or the hold-off's end.
	held bool
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
// latest. It joins the poll in flight if there is one, moving its end to
// this scrape's deadline when that is later: sharing a poll never shortens
// a scrape's budget. A scrape that gives up leaves the poll running for the
// others, and the last one to give up cancels it.
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
	joined := c != nil && p.extend(c, ctx)
	if !joined {
		c = p.start(ctx)
	}
	if c.held {
		p.mu.Unlock()
		if !joined {
			p.countPoll(c.snap)
			p.record(c.snap)
		}
		return c.snap.at(now)
	}
	c.waiters++
	p.mu.Unlock()

	select {
	case <-c.done:
		return c.snap
	case <-ctx.Done():
		// Answer with what has arrived; the rest is reported too late.
		snap := c.run.snapshot()
		p.leave(c)
		return snap
	}
}

// start begins a poll; p.mu is held. The poll does not inherit the
// scrape's cancellation, only its deadline made a little earlier (by a
// timer, which a later scrape joining can move), so its results reach the
// scrape before the scrape has to answer.
func (p *Poller) start(ctx context.Context) *pollCall {
	now := time.Now()
	if until, status := p.target.Client.HoldOff(); now.Before(until) {
		return p.holdOff(ctx, now, until, status)
	}
	pctx, cancel := context.WithCancelCause(context.WithoutCancel(ctx))
	// Every poll is traced, so that the debug views can show any of them.
	trace := &client.Trace{}
	pctx = client.WithTrace(pctx, trace)
	p.seq++
	c := &pollCall{seq: p.seq, done: make(chan struct{}), cancel: cancel, start: now, limit: now.Add(p.opts.Timeout)}
	c.horizon, c.horizonBy = p.horizon(c, ctx)
	c.end = c.horizon.Add(-handoffMargin(c.horizon.Sub(now)))
	c.run = newPollRun(pctx, p.target, p.book, trace, c.horizon.Sub(now))
	c.run.waitedHook = p.waitedHook
	c.timer = time.AfterFunc(c.end.Sub(now), func() { p.expire(c) })
	p.inflight = c
	go func() {
		defer cancel(nil)
		p.finish(c, c.run.run())
	}()
	return c
}

// holdOff starts a poll that sends nothing because the service asked to
// hold off until the given time; p.mu is held.
func (p *Poller) holdOff(ctx context.Context, now, until time.Time, status int) *pollCall {
	p.opts.Logger.Debug("Holding off the service", "until", until, "status", status)
	s := failedSnapshot(now, p.target, p.book, status, client.ErrHeldOff)
	s.HoldOffUntil = until
	p.seq++
	c := &pollCall{seq: p.seq, held: true, snap: s, start: now, limit: now.Add(p.opts.Timeout)}
	c.horizon, c.horizonBy = p.horizon(c, ctx)
	// In flight for at least fairBudget, so that scrapes with no time to
	// spare cannot count a held-off poll each.
	c.timer = time.AfterFunc(min(max(c.horizon.Sub(now), fairBudget), until.Sub(now)), func() {
		p.mu.Lock()
		defer p.mu.Unlock()
		if p.inflight == c {
			p.inflight = nil
		}
	})
	p.inflight = c
	p.last, p.lastSeq = s, c.seq
	return c
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
	if p.ranHook != nil {
		p.ranHook()
	}
	p.mu.Lock()
	c.timer.Stop()
	if p.inflight == c {
		p.inflight = nil
	}
	// Only a poll that every scrape abandoned before all its results
	// arrived (or its deadline passed) is not worth keeping; one that
	// completed is kept, even when its last scrape left just after.
	// An older poll that ends late never replaces a newer one's result.
	if !abandoned && c.seq > p.lastSeq {
		// Kept without its trace: the recent-polls log holds a copy of
		// the requests, and a thousand /probe targets would otherwise
		// keep 4 kB each for nothing.
		kept := *snap
		kept.trace = nil
		p.last, p.lastSeq = &kept, c.seq
	}
	c.snap = snap
	cut := abandoned || c.horizon.Before(c.limit) && c.horizon.Sub(c.start) < fairBudget
	p.mu.Unlock()
	p.logHoldOff()
	// A poll that its caller cut short before the service had a fair
	// chance, and that met no failure but the lack of time, measured the
	// caller: counting it would let any caller skew the SLI.
	if !cut || snap.up() || !snap.onlyOutOfTime() {
		p.countPoll(snap)
	}
	p.record(snap)
	close(c.done)
}

// extend lets the scrape of ctx join c, moving the poll's end to the
// scrape's deadline when that is later; p.mu is held. It reports false
// when c has already reached its end: it is winding down, and the scrape
// needs a poll of its own.
func (p *Poller) extend(c *pollCall, ctx context.Context) bool {
	if c.held {
		return true
	}
	horizon, by := p.horizon(c, ctx)
	if !horizon.After(c.horizon) {
		return true
	}
	if !c.timer.Stop() {
		// The timer fired: expire is about to drop c from inflight.
		if p.inflight == c {
			p.inflight = nil
		}
		return false
	}
	now := time.Now()
	c.horizon, c.horizonBy = horizon, by
	c.end = horizon.Add(-handoffMargin(horizon.Sub(now)))
	c.timer.Reset(c.end.Sub(now))
	c.run.setBudget(horizon.Sub(c.start))
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

// expire ends c at its deadline. A scrape arriving from now on starts a
// poll of its own rather than join one that is being cut short.
func (p *Poller) expire(c *pollCall) {
	if p.expireHook != nil {
		p.expireHook()
	}
	// What the deadline cuts short is a timeout, whatever the scrapes do
	// next: the poll stays worth keeping.
	c.run.settle()
	p.mu.Lock()
	by := c.horizonBy
	p.mu.Unlock()
	c.cancel(&deadlineError{limit: by})
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.inflight == c {
		p.inflight = nil
	}
}

// budget is the time a poll started now for ctx may take.
func (p *Poller) budget(ctx context.Context) time.Duration {
	if deadline, ok := ctx.Deadline(); ok {
		return min(time.Until(deadline), p.opts.Timeout)
	}
	return p.opts.Timeout
}

// logHoldOff logs, after a poll, when the service begins asking the
// exporter to hold off (at warn level, once however many 429s or 503s
// follow), when it asks again (debug), and when a poll finds it no longer
// asks (info).
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

// takeLocations carries over the location checks that a poller of the same
// target kept before a reload replaced it: those of locations still in the
// subset stay, and the others are forgotten. Checks made with other info
// fields would show the wrong labels, and are forgotten too.
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

// leave drops one waiter from c and cancels the poll once nobody waits.
func (p *Poller) leave(c *pollCall) {
	p.mu.Lock()
	defer p.mu.Unlock()
	c.waiters--
	if c.waiters == 0 {
		if !c.timer.Stop() {
			// The deadline has passed (expire may not have run yet), or
			// the poll has ended: either way its outcome is fixed.
			c.run.settle()
		}
		// A poll that has all its results, or has reached its deadline, is
		// settled: cancelling it now changes nothing, and it stays worth
		// keeping.
		c.run.abandon()
		c.cancel(errAbandoned)
		// A scrape arriving now must start a poll of its own rather than
		// join one that is being cancelled.
		if p.inflight == c {
			p.inflight = nil
		}
	}
}

// handoffMargin is how much earlier than the scrape's deadline a poll
// ends: enough to assemble the snapshot and hand it over.
func handoffMargin(budget time.Duration) time.Duration {
	return min(max(budget/20, 5*time.Millisecond), 50*time.Millisecond)
}
